"""The gang of worker actors that runs a training function, and its driver-side handle.

The driver (`WorkerGroup`) reserves one bundle per worker all at once in a placement group
(`reserve_gang`), gives each bundle a `TrainWorker` actor (started in the bundle, or, for
CPU-only bundles, an idle worker of an earlier run on the bundle's node: `worker_pool`), and
waits a bounded time for every one of them to answer: a group starts whole or not at all,
because a framework that waits for a missing peer (TensorFlow's MultiWorkerMirroredStrategy
ignores SIGTERM meanwhile) would otherwise block forever. Ranks follow node order so that the
workers of a node have neighbouring ranks.

A worker actor is threaded (``CONCURRENCY`` threads): ``run`` holds one thread for the whole
training function, ``poll`` answers the driver's long polls for reports on another, and
``commit`` (the driver's word that every rank has made a report, which ends that report's
wait in the training function) needs a third while a poll waits.
Ending a failed or interrupted group is ``nbdist.kill`` of every actor, which SIGKILLs the
worker process, so a worker blocked in a collective with a dead peer ends too; a group whose
run ended cleanly is released instead (`WorkerGroup.release`).

`prewarm` starts workers before any run asks for them (on ``import nbdist.train.torch``):
each imports the framework in a call of its own (``preload``) while it waits in the pool, and
a run's ``setup`` waits for that import to end, so a run may take a worker still importing.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import nbdist
from nbdist.util.placement_group import (
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from nbdist.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from . import worker_pool
from .backend import BackendConfig, WorkerInfo
from .context import Report, Session, SessionStart, TrainContext, set_session
from .errors import WorkerGroupStartError

logger = logging.getLogger(__name__)

# Waiting longer than this for the gang's workers means the cluster cannot hold them now.
WORKER_START_TIMEOUT_S = 30.0
# A worker's threads: the training function, the driver's poll, the driver's commit.
CONCURRENCY = 3
# Train's own calls (actor creation, info, setup, module checks, preloads) are marked so that
# views fold them into the run (`nbdist.events.marks`).
TRAIN = "train"


class TrainWorker:
    """One worker of a training group (an actor)."""

    def __init__(self, rank: int, preload: tuple[str, ...] = ()) -> None:
        self.rank = rank
        self.backend: BackendConfig | None = None
        self.session: Session | None = None
        self.started = time.time()
        self.env_before: dict[str, str | None] = {}
        self.to_preload = preload
        self.preloaded = threading.Event()
        if not preload:
            self.preloaded.set()

    def __repr__(self) -> str:
        # Output lines from this actor are prefixed with its repr: the rank is what reads.
        return f"TrainWorker(rank={self.rank})"

    def info(self) -> WorkerInfo:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        node_id = nbdist.get_runtime_context().get_node_id()
        return WorkerInfo(node_id, nbdist.util.get_node_ip_address(), os.getpid(), port)

    def preload(self) -> None:
        """Import the modules this prepared worker was started with (`prewarm`). A failure
        is left for the run's own set-up to raise, with the run's error handling."""
        try:
            for name in self.to_preload:
                importlib.import_module(name)
        except Exception:
            logger.debug("preloading %s failed", self.to_preload, exc_info=True)
        finally:
            self.preloaded.set()

    def setup(self, rank: int, context: TrainContext, env: dict[str, str],
              backend: BackendConfig) -> None:
        # Two threads importing one package at once can fail (the import system's deadlock
        # check): the run's set-up starts once the preload has ended.
        self.preloaded.wait()
        self.rank = rank
        self.env_before = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        self.backend = backend
        backend.on_start(context)

    def run(self, fn: Callable[..., Any], config: dict[str, Any] | None, start: SessionStart,
            datasets: dict[str, Any]) -> Any:
        context = start.context
        session = Session(context, start.run_dir, start.next_index, start.checkpoint,
                          {name: shard(ds, context.world_rank, context.world_size)
                           for name, ds in datasets.items()}, start.staging_dir)
        self.session = session
        set_session(session)
        try:
            if inspect.signature(fn).parameters:
                return fn(config if config is not None else {})
            return fn()
        finally:
            set_session(None)
            session.finish()

    def poll(self, timeout: float) -> tuple[list[Report], bool]:
        if self.session is None:
            return [], False
        return self.session.take(timeout)

    def commit(self, index: int, path: str | None) -> None:
        """Every rank has made report ``index``: the report waiting for it returns."""
        if self.session is not None:
            self.session.commit(index, path)

    def teardown(self) -> None:
        """End the run's framework set-up and forget the run, so that this process can serve
        another run (see `worker_pool`)."""
        if self.backend is not None:
            self.backend.on_shutdown()
        self.backend = None
        self.session = None
        for name, value in self.env_before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.env_before = {}

    def stale_modules(self) -> list[str]:
        """The user's modules edited since this process started (it must not serve again)."""
        return worker_pool.modules_changed_after(self.started)


def shard(dataset: Any, rank: int, world_size: int) -> Any:
    """Rank ``rank``'s share of ``dataset``: every ``world_size``-th item from ``rank`` on."""
    if hasattr(dataset, "iter_batches") and not hasattr(dataset, "streaming_split"):
        return dataset  # nbdist.data: already this rank's shard (controller._rank_datasets)
    if hasattr(dataset, "iloc"):  # a pandas frame
        return dataset.iloc[rank::world_size]
    if hasattr(dataset, "streaming_split"):  # a Ray Dataset, on backend="ray"
        return dataset.streaming_split(world_size, equal=True)[rank]
    return dataset[rank::world_size]


def reserve_gang(bundle: dict[str, float], count: int, strategy: str,
                 timeout: float) -> tuple[Any, list[dict[str, Any]]]:
    """Reserve ``count`` bundles at once in a placement group; returns the group and the actor
    options that place one worker in each. Fails after ``timeout`` s if the cluster cannot hold
    the whole gang, having reserved nothing."""
    group = placement_group([dict(bundle)] * count, strategy=strategy)
    try:
        placed = group.wait(timeout)
    except BaseException:  # an interrupt while waiting: no reservation may outlive it
        remove_placement_group(group)
        raise
    if not placed:
        remove_placement_group(group)
        raise WorkerGroupStartError(
            f"{count} training workers of {bundle} could not be placed together within "
            f"{timeout:g} s (free now: {nbdist.available_resources()}); a group starts whole "
            "or not at all, so none was started.")
    options = [{"num_cpus": bundle.get("CPU", 0.0), "num_gpus": bundle.get("GPU", 0.0),
                "resources": {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")},
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=i)}
               for i in range(count)]
    return group, options


class WorkerGroup:
    """The driver's handle on a started group: actors in rank order and where they run.

    ``reuse``: the type name of the run's backend when its workers may serve a later run of
    the same type (`worker_pool`); they then come from, and go back to, the driver's pool of
    idle workers, while the placement group still reserves the gang for the run's duration.
    """

    def __init__(self, num_workers: int, bundle: dict[str, float], strategy: str = "PACK",
                 timeout: float = WORKER_START_TIMEOUT_S, reuse: str | None = None) -> None:
        check_fits(bundle, num_workers)
        self._group, per_worker = reserve_gang(bundle, num_workers, strategy, timeout)
        self.reuse = reuse if reuse is not None and worker_pool.enabled(bundle) else None
        self.actors: list[Any] = []
        try:
            self.nodes = self._bundle_nodes(num_workers)
            self._acquire(per_worker)
            self.infos = self._await_start(timeout)
        except BaseException:
            self.kill()
            raise
        order = sorted(range(num_workers), key=lambda i: (self._node_order(i), i))
        self.actors = [self.actors[i] for i in order]
        self.infos = [self.infos[i] for i in order]

    def _bundle_nodes(self, count: int) -> list[str]:
        if self.reuse is None:
            return []
        placed = placement_group_table(self._group).get("bundles_to_node_id", {})
        return [str(placed[i]) for i in range(count)]

    def _acquire(self, per_worker: list[dict[str, Any]]) -> None:
        """One actor per bundle, into ``self.actors`` as each is had (so that a failure or an
        interrupt midway kills those too): an idle worker of the bundle's node that is still
        fresh, or a new one."""
        cls = nbdist.remote(TrainWorker)
        if self.reuse is None:
            for i, opts in enumerate(per_worker):
                self.actors.append(cls.options(max_concurrency=CONCURRENCY, library_call=TRAIN,
                                               **opts).remote(i))
            return
        for i, node in enumerate(self.nodes):
            if not self._take_pooled(node, self.reuse):
                self.actors.append(cls.options(
                    max_concurrency=CONCURRENCY, num_cpus=0, library_call=TRAIN,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                ).remote(i))

    def _take_pooled(self, node: str, kind: str) -> bool:
        """Append a fresh pooled worker of ``node`` to ``self.actors``; False if none is
        left. A stale or dead one is killed and the next one tried."""
        while (actor := worker_pool.take(node, kind)) is not None:
            self.actors.append(actor)
            if _still_fresh(actor):
                return True
            self.actors.pop()
        return False

    def _await_start(self, timeout: float) -> list[WorkerInfo]:
        refs = [a.info.options(library_call=TRAIN).remote() for a in self.actors]
        ready, pending = nbdist.wait(refs, num_returns=len(refs), timeout=timeout)
        if pending:
            raise WorkerGroupStartError(
                f"{len(pending)} of {len(refs)} training workers did not start within "
                f"{timeout:g} s in their reserved bundles; none was kept.")
        try:
            return list(nbdist.get(refs))
        except nbdist.exceptions.ActorDiedError as exc:
            raise WorkerGroupStartError(f"a training worker died while starting: {exc}") from exc

    def _node_order(self, index: int) -> int:
        nodes = list(dict.fromkeys(info.node_id for info in self.infos))
        return nodes.index(self.infos[index].node_id)

    def contexts(self, experiment_name: str, storage_path: str,
                 use_gpu: bool) -> list[TrainContext]:
        nodes = list(dict.fromkeys(info.node_id for info in self.infos))
        out = []
        for rank, info in enumerate(self.infos):
            peers = [i for i, other in enumerate(self.infos) if other.node_id == info.node_id]
            out.append(TrainContext(rank, len(self.infos), peers.index(rank), len(peers),
                                    nodes.index(info.node_id), experiment_name, storage_path,
                                    use_gpu))
        return out

    def setup_refs(self, contexts: list[TrainContext], backend: BackendConfig,
                   env_vars: dict[str, str] | None = None) -> list[Any]:
        """Set each worker's environment (``env_vars``, then the backend's) and start the
        framework; one call per rank."""
        envs = [{**(env_vars or {}), **env} for env in backend.worker_env(self.infos, contexts)]
        return [a.setup.options(library_call=TRAIN).remote(rank, contexts[rank], envs[rank],
                                                         backend)
                for rank, a in enumerate(self.actors)]

    def release(self) -> None:
        """End a group whose workers all tore down cleanly: with reuse, they wait idle for the
        next run; otherwise they are killed. The reservation is given back either way."""
        if self.reuse is None:
            self.kill()
            return
        for actor, info in zip(self.actors, self.infos, strict=True):
            worker_pool.give_back(info.node_id, self.reuse, actor)
        self.actors = []
        self._remove_group()

    def kill(self) -> None:
        """End every worker process now (SIGKILL), then give the reservation back."""
        for actor in self.actors:
            try:
                nbdist.kill(actor)
            except Exception:  # already gone, or the cluster went first
                logger.debug("kill of %r failed", actor, exc_info=True)
        self._remove_group()

    def _remove_group(self) -> None:
        try:
            remove_placement_group(self._group)
        except Exception:  # the cluster is gone, and the reservation with it
            logger.debug("removing the placement group failed", exc_info=True)


def _still_fresh(actor: Any) -> bool:
    """Whether an idle worker is alive and has no stale module; a stale one is killed."""
    try:
        stale = nbdist.get(actor.stale_modules.options(library_call=TRAIN).remote(),
                           timeout=WORKER_START_TIMEOUT_S)
    except Exception:  # it died while idle (memory pressure, a node lost)
        logger.debug("an idle training worker is gone", exc_info=True)
        stale = ["(the worker is gone)"]
    if stale:
        logger.info("starting a new training worker rather than reusing one: %s",
                    ", ".join(stale[:3]))
        try:
            nbdist.kill(actor)
        except Exception:
            logger.debug("kill of a stale worker failed", exc_info=True)
        return False
    return True


def prewarm(kind: str, modules: tuple[str, ...]) -> None:
    """Start workers for a backend of type ``kind`` on the driver's node, each importing
    ``modules`` as soon as it runs, into the driver's pool (`worker_pool`), so that the
    driver's first run skips the import; how many: `worker_pool.prewarm_count`. Waits on
    nothing (actor creation and one call each). Does nothing outside the driver, without a
    cluster, with reuse or preparing off, or when ``kind`` was prepared on this connection."""
    try:
        if not worker_pool.begin_prewarm(kind):
            return
        node = nbdist.get_runtime_context().get_node_id()
        cpus = next((n["Resources"].get("CPU", 0.0) for n in nbdist.nodes()
                     if n["NodeID"] == node), 0.0)
        cls = nbdist.remote(TrainWorker).options(
            max_concurrency=CONCURRENCY, num_cpus=0, library_call=TRAIN,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        for _ in range(worker_pool.prewarm_count(cpus)):
            actor = cls.remote(0, modules)
            worker_pool.add_prepared(node, kind, actor,
                                     actor.preload.options(library_call=TRAIN).remote())
    except Exception:  # the cluster went away meanwhile: the first run starts its own
        logger.warning("preparing training workers failed", exc_info=True)


def check_fits(bundle: dict[str, float], count: int) -> None:
    """Fail at once, not after a timeout, when the whole cluster could never hold the gang."""
    total = nbdist.cluster_resources()
    short = {k: (v * count, total.get(k, 0.0)) for k, v in bundle.items()
             if v * count > total.get(k, 0.0)}
    if short:
        need = ", ".join(f"{k}: {n:g} needed, {t:g} in the cluster" for k, (n, t) in short.items())
        raise WorkerGroupStartError(
            f"{count} workers of {bundle} cannot fit in this cluster ({need}); lower "
            "ScalingConfig.num_workers or resources_per_worker, or add nodes.")
