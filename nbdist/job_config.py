"""``JobConfig``: a driver's job settings in one object, given to ``init(job_config=...)``
(layer L3; Ray's ``ray.job_config.JobConfig``).

What each field means on nbdist's engine:

    runtime_env        the job's runtime env: every task and actor the driver (and its tasks)
                       submit runs with it, each one's own runtime_env merged over it (see
                       `nbdist.driver.runtime_env`). ``init(runtime_env=...)`` replaces it.
    code_search_path   folders put at the front of every worker's ``sys.path`` before the
                       job's first task there, so the job's code is imported from them on
                       each node (Ray's ``PYTHONPATH`` for Python workers). Paths of the
                       worker's machine: give absolute ones.
    ray_namespace      the job's namespace (named actors); ``init(namespace=...)`` replaces it.
    metadata           an opaque dict of str kept with the job: the cluster's key-value table
                       holds it under ``job_metadata:<job id>`` (the ``metadata`` of the job).

``jvm_options`` are accepted and unused (no Java workers); ``default_actor_lifetime`` other
than "non_detached" is refused (give each actor ``lifetime="detached"``).

The code search path travels as a worker setup hook (`_CodeSearchPath`, pickled by reference),
chained before the runtime env's own ``worker_process_setup_hook``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

ACTOR_LIFETIMES = ("non_detached", "detached")


class JobConfig:
    def __init__(self, jvm_options: list[str] | None = None,
                 code_search_path: list[str] | tuple[str, ...] | None = None,
                 runtime_env: dict[str, Any] | None = None, _client_job: bool = False,
                 metadata: dict[str, str] | None = None, ray_namespace: str | None = None,
                 default_actor_lifetime: str = "non_detached",
                 _disable_job_level_lineage_reconstruction: bool = False,
                 _py_driver_sys_path: list[str] | None = None) -> None:
        paths = code_search_path or []
        if not isinstance(paths, (list, tuple)):
            raise TypeError(f"The type of code search path is incorrect: {type(paths)}")
        self.jvm_options = list(jvm_options or [])
        self.code_search_path = list(paths)
        self._client_job = _client_job
        self.metadata: dict[str, str] = dict(metadata or {})
        self.ray_namespace = ray_namespace
        self._py_driver_sys_path = list(_py_driver_sys_path or [])
        self._disable_job_level_lineage_reconstruction = _disable_job_level_lineage_reconstruction
        self.py_logging_config: Any = None
        self.set_runtime_env(runtime_env)
        self.set_default_actor_lifetime(default_actor_lifetime)

    def set_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def set_runtime_env(self, runtime_env: dict[str, Any] | None,
                        validate: bool = False) -> None:
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise TypeError(f"runtime_env must be a dict, not {type(runtime_env).__name__}.")
        self.runtime_env: dict[str, Any] = dict(runtime_env) if runtime_env else {}
        if validate:
            from nbdist.driver import runtime_env as runtime_env_mod

            runtime_env_mod.check(self.runtime_env, "JobConfig")

    def set_ray_namespace(self, ray_namespace: str) -> None:
        self.ray_namespace = ray_namespace

    def set_default_actor_lifetime(self, default_actor_lifetime: str) -> None:
        if default_actor_lifetime not in ACTOR_LIFETIMES:
            raise ValueError("Default actor lifetime must be one of `detached`, "
                             "`non_detached`")
        if default_actor_lifetime == "detached":
            raise NotImplementedError(
                "JobConfig(default_actor_lifetime='detached') is not supported by nbdist yet: "
                "create each actor that should outlive the driver with "
                ".options(lifetime='detached').")
        self.default_actor_lifetime = default_actor_lifetime

    def set_py_logging_config(self, logging_config: Any = None) -> None:
        self.py_logging_config = logging_config

    @classmethod
    def from_json(cls, job_config_json: dict[str, Any]) -> JobConfig:
        return cls(
            jvm_options=job_config_json.get("jvm_options"),
            code_search_path=job_config_json.get("code_search_path"),
            runtime_env=job_config_json.get("runtime_env"),
            metadata=job_config_json.get("metadata"),
            ray_namespace=job_config_json.get("ray_namespace"),
            _client_job=job_config_json.get("client_job", False),
            _py_driver_sys_path=job_config_json.get("py_driver_sys_path"),
        )

    def job_runtime_env(self) -> dict[str, Any] | None:
        """The runtime env the job's work gets: ``runtime_env`` with the code search path
        (None when there is neither)."""
        env = dict(self.runtime_env)
        if self.code_search_path:
            env["worker_process_setup_hook"] = _CodeSearchPath(
                [os.path.abspath(p) for p in self.code_search_path],
                env.get("worker_process_setup_hook"))
        return env or None

    def __repr__(self) -> str:
        return (f"JobConfig(code_search_path={self.code_search_path!r}, "
                f"runtime_env={self.runtime_env!r}, metadata={self.metadata!r}, "
                f"ray_namespace={self.ray_namespace!r})")


class _CodeSearchPath:
    """A worker's setup step: the job's code search path first on ``sys.path``, then the
    runtime env's own setup hook, if any."""

    def __init__(self, paths: list[str], then: Callable[[], Any] | str | None) -> None:
        self.paths = paths
        self.then = then

    def __call__(self) -> None:
        for path in reversed(self.paths):
            if path not in sys.path:
                sys.path.insert(0, path)
        if isinstance(self.then, str):
            module, _, name = self.then.rpartition(".")
            getattr(importlib.import_module(module), name)()
        elif self.then is not None:
            self.then()


def init_arguments(job_config: Any, namespace: str | None, runtime_env: dict[str, Any] | None,
                   ) -> tuple[str | None, dict[str, Any] | None]:
    """``init``'s namespace and job runtime env once ``job_config`` is taken in: the
    arguments given to ``init`` itself win, as in Ray."""
    if not isinstance(job_config, JobConfig):
        raise TypeError(f"init(job_config=...) takes a nbdist.job_config.JobConfig, not "
                        f"{type(job_config).__name__}.")
    if runtime_env:
        job_config = JobConfig(code_search_path=job_config.code_search_path,
                               runtime_env=runtime_env)
    return (namespace if namespace is not None else job_config.ray_namespace,
            job_config.job_runtime_env())
