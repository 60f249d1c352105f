"""``ray.runtime_env`` for code written for Ray: `RuntimeEnv` and `RuntimeEnvConfig`, the
typed spelling of the dict a ``runtime_env=`` option (of ``init``, a task or an actor) takes.

A `RuntimeEnv` is that dict: its fields are checked when it is made, as a plain dict's are
where it is given (unknown fields and wrong types fail at once, with the field named). Which
fields nbdist's own engine applies (``env_vars``, ``working_dir``, ``py_modules``,
``excludes``, ``worker_process_setup_hook``) and which need ``backend="ray"`` (``pip``,
``conda``, ``uv``, ``container``) is told in `nbdist.driver.runtime_env`.
"""

from __future__ import annotations

from typing import Any

from nbdist.driver import runtime_env as _runtime_env


class RuntimeEnvConfig(dict[str, Any]):
    """How a runtime environment is set up: ``setup_timeout_seconds`` and ``eager_install``
    (Ray's; nbdist's engine applies a runtime_env when a worker first runs work with it, so
    both are accepted and kept for ``backend="ray"``) and ``log_files``."""

    def __init__(self, setup_timeout_seconds: int = 600, eager_install: bool = True,
                 log_files: list[str] | None = None) -> None:
        if not isinstance(setup_timeout_seconds, int) or (
                setup_timeout_seconds <= 0 and setup_timeout_seconds != -1):
            raise ValueError("setup_timeout_seconds must be a positive int, or -1 for no limit, "
                             f"not {setup_timeout_seconds!r}.")
        if not isinstance(eager_install, bool):
            raise TypeError(f"eager_install must be a bool, not {type(eager_install).__name__}.")
        super().__init__(setup_timeout_seconds=setup_timeout_seconds,
                         eager_install=eager_install)
        if log_files is not None:
            self["log_files"] = list(log_files)


class RuntimeEnv(dict[str, Any]):
    """A runtime environment: ``RuntimeEnv(env_vars={"MODE": "test"}, working_dir=".")``,
    given wherever ``runtime_env=`` is. Fields left at None are left out; ``_validate=False``
    skips the check (as in Ray)."""

    def __init__(self, *, py_modules: list[Any] | None = None, working_dir: str | None = None,
                 pip: Any = None, conda: Any = None, container: dict[str, Any] | None = None,
                 env_vars: dict[str, str] | None = None,
                 worker_process_setup_hook: Any = None,
                 config: dict[str, Any] | RuntimeEnvConfig | None = None,
                 _validate: bool = True, **kwargs: Any) -> None:
        fields = dict(py_modules=py_modules, working_dir=working_dir, pip=pip, conda=conda,
                      container=container, env_vars=env_vars,
                      worker_process_setup_hook=worker_process_setup_hook, config=config,
                      **kwargs)
        super().__init__((k, v) for k, v in fields.items() if v is not None)
        if _validate:
            _runtime_env.check(dict(self), "RuntimeEnv")

    def to_dict(self) -> dict[str, Any]:
        return dict(self)

    def env_vars(self) -> dict[str, str]:
        return dict(self.get("env_vars") or {})

    def working_dir(self) -> str:
        return str(self.get("working_dir") or "")

    def py_modules(self) -> list[Any]:
        return list(self.get("py_modules") or [])


__all__ = ["RuntimeEnv", "RuntimeEnvConfig"]
