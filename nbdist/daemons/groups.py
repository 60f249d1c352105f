"""Placement groups at the head: the table of groups and the two-phase placement of their
bundles on nodes (layer L2; no sockets: the head passes ``send``).

Why the head: it holds the node table (each node's resources as last reported) and the names,
and a group may span nodes, so one process must decide. One attempt at placing a group:

    choose    `assign` picks a node for each unplaced bundle from the nodes' free resources as
              last reported (each choice is charged against that view until the node reports)
    prepare   each chosen node gets (GROUP, "prepare", pg, attempt, its bundles, commit) and
              holds the resources if they are still free there; it answers the head request
              "group_prepared" (pg, attempt, node index, ok). When the attempt involves one
              node only, ``commit`` is set and that one message places the bundles (the usual
              single-node case costs one message each way).
    commit    every node answered ok: each gets (GROUP, "commit", pg, attempt); CREATED
    cancel    some node said no (or left): the others that said ok get "cancel"; the group
              stays PENDING and tries again when a node reports a change
One attempt per group is in flight at a time. Removal sends (GROUP, "remove", pg, reason) to
every node: the holders give the resources back and end the work in the group, and any node
fails work still waiting for it. A node lost under a group: its bundles are placed again
(RESCHEDULING) the same way; the bundles elsewhere stay where they are.

Infeasible (no assignment fits even the nodes' totals): a cluster that nodes can join keeps
the group PENDING with a warning, as Ray does; one that cannot (the embedded cluster) ends the
group at once with a reason saying what it needs, which its ``ready()`` raises.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from typing import Any

from nbdist.wire import protocol as P

log = logging.getLogger(__name__)

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
EPS = 1e-9
REMEMBER_ENDED = 1000

Bundle = dict[str, float]


class Group:
    __slots__ = ("id", "name", "namespace", "strategy", "bundles", "detached", "job", "state",
                 "nodes", "attempt", "asked", "answered", "held", "refused", "plan", "warned",
                 "created", "reason")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.id: str = spec["id"]
        self.name: str = spec.get("name") or ""
        self.namespace: str = spec.get("namespace") or ""
        self.strategy: str = spec["strategy"]
        self.bundles: list[Bundle] = [dict(b) for b in spec["bundles"]]
        self.detached = spec.get("lifetime") == "detached"
        self.job: int = spec.get("job", 0)
        self.state = "PENDING"
        self.nodes = [0] * len(self.bundles)  # node index of each placed bundle (0: none)
        self.attempt = 0
        self.asked: set[int] = set()  # nodes of the attempt in flight
        self.answered: set[int] = set()
        self.held: set[int] = set()  # nodes of the attempt holding their bundles (said ok)
        self.refused = False
        self.plan: dict[int, int] = {}  # bundle index -> node, of the attempt in flight
        self.warned = False
        self.created = time.time()
        self.reason = ""


def fits(have: Bundle, need: Bundle) -> bool:
    return all(have.get(n, 0.0) >= a - EPS for n, a in need.items())


def assign(todo: list[tuple[int, Bundle]], strategy: str, free: dict[int, Bundle],
           placed: dict[int, int]) -> dict[int, int] | None:
    """A node for each bundle of ``todo`` (index -> node), given each node's ``free``
    resources and where the group's other bundles are (``placed``); None if none fits."""
    free = {n: dict(r) for n, r in free.items()}
    used = collections.Counter(placed.values())
    if strategy == "STRICT_PACK":
        need: Bundle = {}
        for _, res in todo:
            for name, amount in res.items():
                need[name] = need.get(name, 0.0) + amount
        targets = set(used) or set(free)
        for node in sorted(targets, key=lambda n: -free.get(n, {}).get("CPU", 0.0)):
            if node in free and fits(free[node], need):
                return {i: node for i, _ in todo}
        return None
    out: dict[int, int] = {}
    spread = strategy in ("SPREAD", "STRICT_SPREAD")
    for i, res in sorted(todo, key=lambda b: -sum(b[1].values())):
        candidates = [n for n, have in free.items() if fits(have, res)
                      and not (strategy == "STRICT_SPREAD" and used[n])]
        if not candidates:
            return None
        if spread:
            node = min(candidates, key=lambda n: (used[n], -free[n].get("CPU", 0.0), n))
        else:
            node = min(candidates, key=lambda n: (-used[n], -free[n].get("CPU", 0.0), n))
        out[i] = node
        used[node] += 1
        have = free[node]
        for name, amount in res.items():
            have[name] = have.get(name, 0.0) - amount
    return out


def check_spec(spec: dict[str, Any]) -> None:
    """Ray's checks of a new group, worded for the user."""
    bundles = spec.get("bundles")
    if not isinstance(bundles, list) or not bundles:
        raise ValueError("A placement group needs a non-empty list of bundles "
                         "(dicts of resource name -> amount).")
    for bundle in bundles:
        if not isinstance(bundle, dict) or not bundle or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and v >= 0
                for k, v in bundle.items()):
            raise ValueError(f"Bundle {bundle!r} is not a dict of resource name -> "
                             "non-negative amount.")
        if not any(bundle.values()):
            raise ValueError(f"Bundle {bundle!r} asks for no resources; a bundle must ask for "
                             "some (e.g. {'CPU': 1}).")
    if spec.get("strategy") not in STRATEGIES:
        raise ValueError(f"Invalid placement group strategy {spec.get('strategy')!r}; valid "
                         f"strategies: {', '.join(STRATEGIES)}.")
    if spec.get("lifetime") not in (None, "detached"):
        raise ValueError("A placement group's lifetime must be None or 'detached'.")


class GroupTable:
    """The head's placement groups (see the module docstring)."""

    def __init__(self, send: Callable[[int, tuple], None],
                 nodes: Callable[[], dict[int, dict[str, Any]]], can_grow: bool) -> None:
        self.send = send  # to node index
        self.nodes = nodes  # alive nodes: index -> {"node_id", "total", "available"}
        self.can_grow = can_grow
        self.groups: dict[str, Group] = {}
        self.names: dict[tuple[str, str], str] = {}
        self.ended: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()

    # ---------------------------------------------------------------- requests
    def create(self, spec: dict[str, Any]) -> dict[str, Any]:
        check_spec(spec)
        group = Group(spec)
        if group.name:
            key = (group.namespace, group.name)
            if key in self.names:
                raise ValueError(
                    f"A placement group named {group.name!r} already exists in namespace "
                    f"{group.namespace!r}; choose another name, or use "
                    "get_placement_group() to reach it.")
            self.names[key] = group.id
        self.groups[group.id] = group
        self._place(group)
        return self.row(group)

    def remove(self, pg: str, reason: str = "") -> bool:
        group = self.groups.pop(pg, None)
        if group is None:
            return False
        if group.name:
            self.names.pop((group.namespace, group.name), None)
        group.state = "REMOVED"
        group.reason = reason or f"its placement group {pg} was removed"
        for node in self.nodes():
            self.send(node, (P.GROUP, "remove", pg, group.reason))
        self.ended[pg] = self.row(group)
        while len(self.ended) > REMEMBER_ENDED:
            self.ended.popitem(last=False)
        return True

    def table(self, pg: str | None) -> Any:
        if pg is not None:
            group = self.groups.get(pg)
            return self.row(group) if group is not None else self.ended.get(pg)
        rows = dict(self.ended)
        rows.update((g.id, self.row(g)) for g in self.groups.values())
        return rows

    def named(self, name: str, namespace: str) -> dict[str, Any] | None:
        pg = self.names.get((namespace, name))
        return None if pg is None else self.row(self.groups[pg])

    def job_ended(self, job: int) -> None:
        """A driver left: its groups that are not detached go, as Ray removes them."""
        for group in [g for g in self.groups.values() if g.job == job and not g.detached]:
            self.remove(group.id, f"the driver that created placement group {group.id} exited")

    def row(self, group: Group) -> dict[str, Any]:
        """The group as Ray's ``placement_group_table`` shows it."""
        ids = {i: n.get("node_id", "") for i, n in self.nodes().items()}
        return {
            "placement_group_id": group.id,
            "name": group.name,
            "namespace": group.namespace,
            "bundles": {i: dict(b) for i, b in enumerate(group.bundles)},
            "bundles_to_node_id": {i: ids.get(n, "") for i, n in enumerate(group.nodes) if n},
            "strategy": group.strategy,
            "state": group.state,
            "is_detached": group.detached,
            "stats": {"scheduling_state": "FINISHED" if group.state == "CREATED" else (
                "REMOVED" if group.state == "REMOVED" else "QUEUED")},
            "reason": group.reason,
        }

    # ---------------------------------------------------------------- placing
    def _place(self, group: Group) -> None:
        if group.asked:
            return  # an attempt is in flight; its end tries again
        todo = [(i, group.bundles[i]) for i, node in enumerate(group.nodes) if not node]
        if not todo:
            return
        alive = self.nodes()
        placed = {i: n for i, n in enumerate(group.nodes) if n}
        plan = assign(todo, group.strategy, {n: info["available"] for n, info in alive.items()},
                      placed)
        if plan is None:
            if assign(todo, group.strategy, {n: info["total"] for n, info in alive.items()},
                      placed) is None:
                self._infeasible(group, alive)
            return
        group.attempt += 1
        group.plan = plan
        by_node: dict[int, list[int]] = {}
        for i, node in plan.items():
            by_node.setdefault(node, []).append(i)
        group.asked = set(by_node)
        group.answered = set()
        group.held = set()
        group.refused = False
        commit = len(by_node) == 1
        for node, indexes in by_node.items():
            avail = alive[node]["available"]
            for i in indexes:  # charged until the node reports again
                for name, amount in group.bundles[i].items():
                    avail[name] = avail.get(name, 0.0) - amount
            self.send(node, (P.GROUP, "prepare", group.id, group.attempt,
                             [(i, group.bundles[i]) for i in indexes], commit))

    def _infeasible(self, group: Group, alive: dict[int, dict[str, Any]]) -> None:
        need = ", ".join(map(str, group.bundles))
        have = "; ".join(
            "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(info["total"].items())
                            if "_group_" not in k and not k.startswith("node:")
                            and "memory" not in k) + "}"
            for info in alive.values()) or "no nodes"
        text = (f"placement group {group.id} can never be placed: its bundles [{need}] with "
                f"strategy {group.strategy} need more than the nodes have ({have}). Ask for "
                "fewer resources, or start the cluster with more (init(num_cpus=..., "
                "num_gpus=..., resources={...}), or nodes with them: nbdist start --address ...)")
        if not self.can_grow:
            self.remove(group.id, text)
        elif not group.warned:
            group.warned = True
            log.warning("%s; it waits until nodes that can hold it join.", text)

    def prepared(self, pg: str, attempt: int, node: int, ok: bool) -> None:
        group = self.groups.get(pg)
        if group is None or attempt != group.attempt or node not in group.asked:
            if ok:
                self.send(node, (P.GROUP, "cancel", pg, attempt))
            return
        group.answered.add(node)
        if ok:
            group.held.add(node)
        group.refused |= not ok
        if group.answered >= group.asked:
            self._attempt_ended(group)

    def _attempt_ended(self, group: Group) -> None:
        asked, group.asked = group.asked, set()
        if group.refused:
            for node in group.held & asked:
                self.send(node, (P.GROUP, "cancel", group.id, group.attempt))
            return  # tried again when a node reports
        if len(asked) > 1:
            for node in asked:
                self.send(node, (P.GROUP, "commit", group.id, group.attempt))
        for i, node in group.plan.items():
            group.nodes[i] = node
        group.plan = {}
        group.state = "CREATED"

    def changed(self) -> None:
        """A node reported: groups waiting for room try again."""
        for group in list(self.groups.values()):
            if group.state != "CREATED" and not group.asked:
                self._place(group)

    def node_lost(self, node: int) -> None:
        for group in list(self.groups.values()):
            if node in group.asked:  # the attempt fails; the node cannot cancel: it is gone
                group.refused = True
                group.asked.discard(node)
                group.answered.discard(node)
                if group.answered >= group.asked:
                    self._attempt_ended(group)
            if node in group.nodes:
                group.nodes = [0 if n == node else n for n in group.nodes]
                group.state = "RESCHEDULING"
                log.warning("placement group %s lost %d bundle(s) with node %d; placing them "
                            "again", group.id, group.nodes.count(0), node)
            if group.state != "CREATED":
                self._place(group)
