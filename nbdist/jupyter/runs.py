"""Library runs (Tune searches, Train runs) folded from `nbdist.events.RunUpdate` records.

Pure, no I/O, not thread-safe (its owner holds a lock): the panel's model (``model.py``) and
the inline view (``runview.py``) each keep one.

What flows in: RunUpdate records, one per report or change of status of a *member* (a trial,
or a training worker ``"rank N"``) of a *run* (keyed ``"<library>:<run>"``). What flows out:
JSON-ready `schema.Run` records: ``snapshot()`` (everything kept) and ``take_delta()`` (the
members that changed since the previous call, each a full record except that its ``curves``
and ``marks`` hold only the points and marks that are news since then).

State and bounds (a search of a thousand trials, each reporting for hours, stays small):

    runs        run id -> RunState; at most ``max_runs`` (the oldest updated goes first)
    members     per run, member id -> MemberState: status, iteration, last metrics, config,
                note, the reports folded (``reports``), its curves and its marks
    curves      per member, the first ``max_metrics`` metric names the run reported (bookkeeping
                names such as ``time_this_iter_s`` left out), each at most ``max_points``
                points ``[report, iteration, value]``: past that, every other point is dropped
                and from then on only every ``stride``-th report is kept (stride doubles each
                time), so a curve keeps its shape over the whole run
    marks       per member, the last ``max_marks`` events worth a mark on its curve
                ``[report, iteration, kind, note]``: kind "stopped" (a scheduler ended it: a
                TERMINATED record whose note says "stopped by ..."), "error", "checkpoint",
                "restart"

``report`` numbers each member's records as folded (1, 2, ...): a view appends a point or mark
only if its number is above the last it holds, so a delta applied twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from nbdist import events as ev
from nbdist.jupyter import schema

MAX_RUNS = 20
MAX_POINTS = 200  # per curve
MAX_METRICS = 8  # curves per run
MAX_MARKS = 50  # per member
MAX_CONFIG_CHARS = 80
# Numbers every Tune report carries that say nothing about learning: no curve for them.
BOOKKEEPING = frozenset((
    "training_iteration", "iterations_since_restore", "timesteps_since_restore",
    "time_this_iter_s", "time_total_s", "time_since_restore", "timestamp", "pid", "done",
    "epoch", "step"))
TERMINAL_STATUSES = frozenset(("TERMINATED", "ERROR"))


def run_key(e: ev.RunUpdate) -> str:
    return f"{e.library}:{e.run}"


def mark_kind(status: str, note: str, previous_status: str) -> str | None:
    """The kind of mark a record makes on its member's curve, or None."""
    lowered = note.lower()
    if status == "ERROR" and previous_status != "ERROR":
        return "error"
    if status == "RESTARTING" and previous_status != "RESTARTING" or "restart" in lowered:
        return "restart"
    if "checkpoint" in lowered:
        return "checkpoint"
    if status == "TERMINATED" and "stopped by" in lowered and previous_status != "TERMINATED":
        return "stopped"  # by a scheduler (a trial that ran its course has no mark)
    return None


class Curve:
    """One metric of one member, thinned to at most ``limit`` points."""

    __slots__ = ("points", "fresh", "stride", "seen", "limit")

    def __init__(self, limit: int) -> None:
        self.points: list[list[float]] = []
        self.fresh: list[list[float]] = []  # points added since the last delta
        self.stride = 1
        self.seen = 0  # values offered
        self.limit = limit

    def add(self, report: int, iteration: int, value: float) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        point = [report, iteration, value]
        self.points.append(point)
        self.fresh.append(point)
        if len(self.points) > self.limit:
            self.points = self.points[::2]
            kept = {id(p) for p in self.points}
            self.fresh = [p for p in self.fresh if id(p) in kept]
            self.stride *= 2


class MemberState:
    __slots__ = ("id", "status", "iteration", "config", "metrics", "note", "reports",
                 "curves", "marks", "fresh_marks", "updated")

    def __init__(self, member: str) -> None:
        self.id = member
        self.status = "PENDING"
        self.iteration = 0
        self.config: dict[str, str] = {}
        self.metrics: dict[str, float] = {}
        self.note = ""
        self.reports = 0
        self.curves: dict[str, Curve] = {}
        self.marks: list[list[object]] = []
        self.fresh_marks: list[list[object]] = []
        self.updated = 0.0

    def to_json(self, news_only: bool) -> schema.RunMember:
        if news_only:
            curves = {name: c.fresh for name, c in self.curves.items() if c.fresh}
            marks = self.fresh_marks
        else:
            curves = {name: c.points for name, c in self.curves.items()}
            marks = self.marks
        return {"id": self.id, "status": self.status, "iteration": self.iteration,
                "config": dict(self.config), "metrics": dict(self.metrics), "note": self.note,
                "reports": self.reports, "curves": {k: [list(p) for p in v]
                                                    for k, v in curves.items()},
                "marks": [list(m) for m in marks], "updated": round(self.updated, 3)}

    def settle(self) -> None:
        """What was news has been sent."""
        for curve in self.curves.values():
            curve.fresh = []
        self.fresh_marks = []


class RunState:
    __slots__ = ("id", "library", "name", "metrics", "members", "updated")

    def __init__(self, run_id: str, library: str, name: str) -> None:
        self.id, self.library, self.name = run_id, library, name
        self.metrics: list[str] = []  # the names followed as curves, in order of appearance
        self.members: dict[str, MemberState] = {}
        self.updated = 0.0

    def to_json(self, members: Iterable[str] | None = None) -> schema.Run:
        news_only = members is not None
        chosen = self.members if members is None else members
        return {"id": self.id, "library": self.library, "name": self.name,
                "metrics": list(self.metrics),
                "members": {m: self.members[m].to_json(news_only) for m in chosen},
                "updated": round(self.updated, 3)}


class RunsFold:
    """RunUpdate records folded into runs (see the module docstring)."""

    def __init__(self, *, max_runs: int = MAX_RUNS, max_points: int = MAX_POINTS,
                 max_metrics: int = MAX_METRICS, max_marks: int = MAX_MARKS) -> None:
        self.max_runs, self.max_points = max_runs, max_points
        self.max_metrics, self.max_marks = max_metrics, max_marks
        self.runs: dict[str, RunState] = {}
        self._dirty: dict[str, set[str]] = {}  # run id -> members changed since the delta
        self._removed: set[str] = set()

    def apply(self, e: ev.RunUpdate) -> None:
        """Fold one record."""
        run_id = run_key(e)
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = RunState(run_id, e.library, e.run)
            run.updated = e.time  # so that it is not the one to go
            self._removed.discard(run_id)
            self._evict()
        member = run.members.get(e.member)
        if member is None:
            member = run.members[e.member] = MemberState(e.member)
        member.reports += 1
        report = member.reports
        kind = mark_kind(e.status, e.note, member.status)
        metrics = {k: float(v) for k, v in e.metrics}
        # A change of status repeats the last report's numbers: no second point for them.
        news = bool(metrics) and (e.iteration != member.iteration or metrics != member.metrics)
        member.status, member.iteration, member.note = e.status, e.iteration, e.note
        member.updated = run.updated = e.time
        if e.config:
            member.config = {k: str(v)[:MAX_CONFIG_CHARS] for k, v in e.config}
        if metrics:
            member.metrics = metrics
        if news:
            self._add_points(run, member, report, e)
        if kind is not None:
            mark: list[object] = [report, e.iteration, kind, e.note]
            member.marks.append(mark)
            member.fresh_marks.append(mark)
            del member.marks[:-self.max_marks]
            del member.fresh_marks[:-self.max_marks]
        self._dirty.setdefault(run_id, set()).add(e.member)

    def _add_points(self, run: RunState, member: MemberState, report: int,
                    e: ev.RunUpdate) -> None:
        for name, value in e.metrics:
            if name not in run.metrics:
                if name in BOOKKEEPING or len(run.metrics) >= self.max_metrics:
                    continue
                run.metrics.append(name)
            curve = member.curves.get(name)
            if curve is None:
                curve = member.curves[name] = Curve(self.max_points)
            curve.add(report, e.iteration, float(value))

    def _evict(self) -> None:
        while len(self.runs) > self.max_runs:
            oldest = min(self.runs.values(), key=lambda r: r.updated)
            del self.runs[oldest.id]
            self._dirty.pop(oldest.id, None)
            self._removed.add(oldest.id)

    def snapshot(self) -> dict[str, schema.Run]:
        return {rid: run.to_json() for rid, run in self.runs.items()}

    def changed(self) -> bool:
        return bool(self._dirty or self._removed)

    def take_delta(self) -> tuple[dict[str, schema.Run], list[str]]:
        """(changed runs with their changed members, news only; runs removed), and what was
        news is no longer."""
        out: dict[str, schema.Run] = {}
        for run_id, members in self._dirty.items():
            run = self.runs.get(run_id)
            if run is None:
                continue
            out[run_id] = run.to_json(sorted(members))
            for m in members:
                run.members[m].settle()
        removed = sorted(self._removed)
        self._dirty, self._removed = {}, set()
        return out, removed



def finished(run: schema.Run) -> bool:
    """Whether every member of a run has ended."""
    return bool(run["members"]) and all(
        m["status"] in TERMINAL_STATUSES for m in run["members"].values())
