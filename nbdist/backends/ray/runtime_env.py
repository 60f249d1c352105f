"""``runtime_env`` on Ray tasks and actors, with local folders as on nbdist's engine.

Ray takes ``env_vars`` (and pip, conda, uv, container: environments it builds itself) in a
task's or actor's runtime_env, but ``working_dir`` and ``py_modules`` there only as remote URIs:
local folders are uploaded only for the job-level runtime_env of ``ray.init``. nbdist ships
them itself, as the engine does (`nbdist.driver.runtime_env`):

    driver   each local folder, .py file or module is zipped (``excludes`` left out, fixed
             timestamps so equal content gives an equal digest) and ``ray.put`` once per
             digest; the refs stay held for the session. `split` returns the runtime_env
             Ray gets (the fields Ray handles, plus the env var ``NBDIST_RUNTIME_ENV`` set
             to a digest of the whole environment) and the `Shipped` spec the call carries.
    worker   `apply` unpacks each package once per node under ``<session dir>/
             nbdist_runtime_resources/<digest>``, puts py_modules on ``sys.path``, makes the
             working_dir the cwd and ``sys.path[0]``, and runs ``worker_process_setup_hook``,
             once per process.

Because Ray keeps a pool of workers per distinct runtime_env, the digest in
``NBDIST_RUNTIME_ENV`` keeps work with a shipped environment out of other work's processes
(and out of those of another shipped environment), as a job-level runtime_env would. Nested
work inherits its process's environment: Ray merges the parent's runtime_env (env vars key by
key) under the child's, and the child's calls carry the parent's spec unless they ship their
own. Remote URIs (``s3://...``, ``gcs://...``) are left to Ray.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

import cloudpickle

from nbdist.driver import runtime_env as engine_env

SHIPPED_FIELDS = ("working_dir", "py_modules", "excludes", "worker_process_setup_hook")
KEY_VAR = "NBDIST_RUNTIME_ENV"
RESOURCES_DIR = "nbdist_runtime_resources"


@dataclass(frozen=True)
class Shipped:
    """What a call's worker applies before the call: packages as (digest, [ray ref])."""

    key: str
    root: str
    working_dir: tuple[str, list[Any]] | None
    py_modules: tuple[tuple[str, list[Any]], ...]
    setup_hook: bytes | str | None


def _remote(value: Any) -> bool:
    return isinstance(value, str) and "://" in value


class Shipper:
    """The driver's packages and specs for one Ray session."""

    def __init__(self, session_dir: str) -> None:
        self.root = os.path.join(session_dir or tempfile.gettempdir(), RESOURCES_DIR)
        self._packages: dict[str, Any] = {}
        self._specs: dict[str, tuple[dict[str, Any] | None, Shipped | None]] = {}

    def split(self, env: dict[str, Any] | None
              ) -> tuple[dict[str, Any] | None, Shipped | None]:
        """(the runtime_env for Ray, the spec nbdist applies in the worker, None if none).
        Nested work without folders of its own inherits its process's: Ray gives it the
        parent's runtime_env, digest included, so it runs in such a worker too."""
        if not env or not any(env.get(k) for k in SHIPPED_FIELDS):
            return env, _applied_spec
        text = json.dumps(env, sort_keys=True, default=repr)
        found = self._specs.get(text)
        if found is None:
            found = self._specs[text] = self._split(env)
        return found

    def _split(self, env: dict[str, Any]) -> tuple[dict[str, Any], Shipped]:
        ray_env = {k: v for k, v in env.items() if k not in SHIPPED_FIELDS}
        excludes = list(env.get("excludes") or ())
        wd = env.get("working_dir")
        working_dir = None
        if wd and _remote(wd):
            ray_env["working_dir"] = wd
        elif wd:
            working_dir = self._package(engine_env._zip_tree(wd, excludes, ""))
        modules = []
        remote_modules = []
        for module in env.get("py_modules") or ():
            if _remote(module):
                remote_modules.append(module)
            else:
                modules.append(self._package(engine_env._zip_module(module, excludes)))
        if remote_modules:
            ray_env["py_modules"] = remote_modules
        hook = env.get("worker_process_setup_hook")
        if hook is not None and not isinstance(hook, str):
            hook = cloudpickle.dumps(hook)
        digest = hashlib.sha256(json.dumps(
            [working_dir and working_dir[0], [m[0] for m in modules],
             hashlib.sha256(hook).hexdigest() if isinstance(hook, bytes) else hook],
        ).encode()).hexdigest()[:24]
        ray_env["env_vars"] = {**(env.get("env_vars") or {}), KEY_VAR: digest}
        return ray_env, Shipped(digest, self.root, working_dir, tuple(modules), hook)

    def _package(self, data: bytes) -> tuple[str, list[Any]]:
        import ray

        digest = hashlib.sha256(data).hexdigest()[:32]
        ref = self._packages.get(digest)
        if ref is None:
            ref = self._packages[digest] = ray.put(data)
        # In a list, so that Ray hands the worker the ref, not the bytes, with every call.
        return digest, [ref]


# ------------------------------------------------------------------------ in the worker
_applied: str | None = None
_applied_spec: Shipped | None = None


def apply(spec: Shipped) -> None:
    """Give this worker process the shipped environment (once: Ray gives the process no
    other, see the module docstring)."""
    global _applied, _applied_spec
    if _applied == spec.key:
        return
    if _applied is not None:
        raise RuntimeError("this Ray worker already runs with another runtime_env")
    for digest, ref in spec.py_modules:
        sys.path.insert(0, _unpack(spec.root, digest, ref[0]))
    if spec.working_dir is not None:
        path = _unpack(spec.root, spec.working_dir[0], spec.working_dir[1][0])
        os.chdir(path)
        sys.path.insert(0, path)
    hook = spec.setup_hook
    if isinstance(hook, str):
        module, _, name = hook.rpartition(".")
        getattr(importlib.import_module(module), name)()
    elif hook is not None:
        cloudpickle.loads(hook)()
    _applied, _applied_spec = spec.key, spec


def _unpack(root: str, digest: str, ref: Any) -> str:
    """The package's folder on this node, unpacked by the first worker that needs it."""
    import ray

    return engine_env.unpack_once(root, digest, lambda: ray.get(ref))


class ShippedFunction:
    """A Ray remote function whose calls carry a `Shipped` spec: ``.remote`` as Ray's."""

    def __init__(self, fn: Any, spec: Shipped) -> None:
        self.fn = fn
        self.spec = spec

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn.remote(self.spec, *args, **kwargs)


def task_function(run: Any) -> Any:
    """``run`` (a task wrapper) taking a `Shipped` spec first."""

    if inspect.isgeneratorfunction(run):
        def shipped_gen(nbdist_env: Shipped, *args: Any, **kwargs: Any) -> Any:
            apply(nbdist_env)
            yield from run(*args, **kwargs)

        out: Any = shipped_gen
    else:
        def shipped(nbdist_env: Shipped, *args: Any, **kwargs: Any) -> Any:
            apply(nbdist_env)
            return run(*args, **kwargs)

        out = shipped
    out.__name__ = out.__qualname__ = run.__name__
    out.__doc__ = run.__doc__
    return out


def host_class(host: type) -> type:
    """A subclass of the actor host ``host`` whose constructor takes a `Shipped` spec after
    the tag and applies it before the user's ``__init__`` runs."""
    base_init: Any = inspect.getattr_static(host, "__init__")
    if inspect.iscoroutinefunction(base_init):
        async def async_init(self: Any, nbdist_tag: Any, nbdist_env: Shipped, *args: Any,
                             **kwargs: Any) -> None:
            apply(nbdist_env)
            await base_init(self, nbdist_tag, *args, **kwargs)

        init: Any = async_init
    else:
        def sync_init(self: Any, nbdist_tag: Any, nbdist_env: Shipped, *args: Any,
                      **kwargs: Any) -> None:
            apply(nbdist_env)
            base_init(self, nbdist_tag, *args, **kwargs)

        init = sync_init
    sub = type(host.__name__, (host,), {"__init__": init, "__module__": host.__module__})
    sub.__qualname__ = host.__qualname__
    return sub
