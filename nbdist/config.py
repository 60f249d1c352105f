"""Runtime configuration (layer L0).

Read when a runtime starts (never at import): defaults, overridden by ``NBDIST_*`` environment
variables, overridden by arguments to ``init()``. Values travel to the cluster processes as a
plain dict, so each process sees the same configuration.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from typing import Any

MiB = 1 << 20


@dataclass
class Config:
    # Values whose pickled size is at most this travel inside messages; larger ones go to
    # shared memory (the node's arena, or a file per object under shm_dir).
    inline_max_bytes: int = 100 * 1024
    # Object store capacity; 0 means a fraction of RAM (store_fraction).
    object_store_memory: int = 0
    store_fraction: float = 0.3
    shm_dir: str = "/dev/shm"
    # Size of each node's shared-memory arena (see nbdist/objects/store.py): 0 means the store's
    # capacity, a negative value no arena. What the arena cannot take goes to a file per object.
    arena_bytes: int = 0
    # When the store is full, the least recently needed objects are spilled to files in
    # <spill_dir>/nbdist-spill-<node pid>/ (default: the system's temp dir), at most
    # spill_max_bytes of them (0: no limit but the disk), and read back when needed.
    spill_dir: str = ""
    spill_max_bytes: int = 0
    # Nodes on one machine hand each other large objects as hard links in the shared-memory
    # folder (no copy); off, they go through the transport as between machines.
    same_host_links: bool = True
    # TLS for TCP connections between machines (PEM files; with a CA, certificates are
    # required on both sides and must be signed by it). Empty: no TLS.
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    # Transport.
    max_frame_bytes: int = 256 * MiB
    handshake_timeout_s: float = 5.0
    # Worker pool: how many task workers may exist beyond num_cpus (blocked in get, etc.).
    max_extra_workers: int = 64
    # A driver calls an actor on its own node over a direct link to the actor's worker
    # (see nbdist/driver/direct.py); off, every call goes through the node daemon.
    direct_actor_calls: bool = True
    # Task workers run at this much lower CPU priority (nice), each in a session of its own
    # where Linux shares the CPU between sessions first (autogroup): on a machine the run
    # saturates, the notebook, the browser and the node daemon come first, and actors (often
    # services others wait on) keep the node's priority (docs/architecture.md). With nothing
    # else wanting the CPU it changes nothing. 0: task workers run as the node.
    worker_nice: int = 5
    # Worker stdout/stderr is printed on the driver with a "(name pid=N)" prefix.
    log_to_driver: bool = True
    # A task that no node has the resources for stays pending this long (as Ray keeps it
    # pending; in a cluster started with `nbdist start` a node with them may join), then fails
    # with a ValueError naming what it needs.
    infeasible_wait_s: float = 5.0
    # Events kept for late subscribers and timelines.
    event_buffer: int = 200_000
    # Memory protection (nbdist/daemons/memory_monitor.py): past this fraction of the
    # machine's (or cgroup's) memory in use, a node kills the worker of its most recently
    # started retriable task; checked every memory_monitor_refresh_ms (0: never). Ray's defaults.
    memory_usage_threshold: float = 0.95
    memory_monitor_refresh_ms: int = 250

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def load(overrides: dict[str, Any] | None = None) -> Config:
    """Defaults, then NBDIST_<NAME> environment variables, then ``overrides``."""
    cfg = Config()
    for f in fields(Config):
        raw = os.environ.get("NBDIST_" + f.name.upper())
        if raw is None:
            continue
        current = getattr(cfg, f.name)
        if isinstance(current, bool):
            setattr(cfg, f.name, raw.strip().lower() in ("1", "true", "yes", "on"))
        else:
            setattr(cfg, f.name, type(current)(raw))
    for key, value in (overrides or {}).items():
        if value is not None and hasattr(cfg, key):
            setattr(cfg, key, value)
    if cfg.object_store_memory <= 0:
        cfg.object_store_memory = int(total_memory() * cfg.store_fraction)
    return cfg


def total_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30
