"""Runtime environments: what a task's or actor's worker process gets before it runs (layer L2).

Ray's ``runtime_env`` fields that make sense for processes forked from the node daemon, in the
driver's Python environment:

    env_vars                   set in the worker's environment
    working_dir                a local folder or .zip (a path, or a file:// URI of this
                               host): zipped by the submitting process, stored once in
                               the object store, unpacked once per node under
                               ``<session dir>/runtime_resources/<digest>``; the worker's cwd
                               and the first entry of its sys.path
    py_modules                 local folders, .py files (paths or file:// URIs) or imported
                               modules: the same way, each unpacked folder put on sys.path
    excludes                   glob patterns (of paths relative to the folder, or of names)
                               left out of working_dir and py_modules
    worker_process_setup_hook  a callable (or "module.function") run once in each worker
                               process before its first task

pip, conda, uv, container and image_uri would need an environment other than the driver's:
they fail with an error saying what is supported.

How it travels: the submitting process turns a runtime_env into its *wire form* (`wire`): the
env vars, the object ids and digests of the packages, the pickled hook, and ``key``, a digest
of all of these. The wire form rides in the task spec's ``extra`` (``extra["runtime_env"]``).
The node runs a task only in a worker that has no runtime_env yet or has this key
(`nbdist.scheduler.workers`: a pool per key); the worker applies it on its first such task
(`apply`) and keeps it for life. Nested work inherits its process's runtime_env; a runtime_env
given to nested work (or to a task when ``init`` had one) is merged over it, ``env_vars``
key by key, as Ray merges a child's over its parent's.

State: the submitting process caches packages by digest (their refs kept for its lifetime, so
the objects stay stored) and wire forms by the runtime_env's text; a worker records the key it
applied. Both are per process and need no lock beyond the GIL: the same result is computed if
two threads race.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import importlib
import io
import json
import os
import shutil
import sys
import types
import urllib.parse
import zipfile
from typing import Any

import cloudpickle

from nbdist.wire import protocol as P

SUPPORTED = ("env_vars", "working_dir", "py_modules", "excludes", "worker_process_setup_hook")
UNSUPPORTED = ("pip", "conda", "uv", "container", "image_uri", "java_jars", "nsight",
               "mpi", "_nsight", "_rocprof_sys")
IGNORED = ("config", "_ray_release", "eager_install")
MAX_PACKAGE_BYTES = 200 * 2**20
_EPOCH = (1980, 1, 1, 0, 0, 0)

_packages: dict[tuple[int, str], Any] = {}  # (id of the client, digest) -> ObjectRef
_wired: dict[tuple[int, str], dict[str, Any]] = {}
_job_env: dict[str, Any] | None = None  # init(runtime_env=...) of this driver
_inherited: dict[str, Any] | None = None  # the wire form this worker applied
_applied_key: str | None = None
_omp_set: str | None = None  # the OMP_NUM_THREADS this worker set for its task


def check(env: Any, where: str) -> None:
    """Types and field names, checked where the runtime_env is given (both backends)."""
    if env is None:
        return
    if not isinstance(env, dict):
        raise TypeError(f"runtime_env of {where} must be a dict, not {type(env).__name__}.")
    for key in env:
        if key not in SUPPORTED + UNSUPPORTED + IGNORED:
            close = difflib.get_close_matches(str(key), SUPPORTED, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"runtime_env of {where}: unknown field {key!r}.{hint} Fields: "
                             f"{', '.join(SUPPORTED + UNSUPPORTED)}.")
    env_vars = env.get("env_vars")
    if env_vars is not None and not (isinstance(env_vars, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items())):
        raise TypeError(f"runtime_env['env_vars'] of {where} must be a dict of str to str.")
    for key in ("py_modules", "excludes"):
        if env.get(key) is not None and not isinstance(env[key], (list, tuple)):
            raise TypeError(f"runtime_env[{key!r}] of {where} must be a list.")
    hook = env.get("worker_process_setup_hook")
    if hook is not None and not (callable(hook) or isinstance(hook, str)):
        raise TypeError(f"runtime_env['worker_process_setup_hook'] of {where} must be a "
                        "callable or a 'module.function' string.")


def _refuse_unsupported(env: dict[str, Any]) -> None:
    given = [k for k in UNSUPPORTED if env.get(k)]
    if given:
        raise ValueError(
            f"runtime_env field(s) {', '.join(map(repr, given))} are not supported by nbdist's "
            "own engine: its workers run in the driver's Python environment. Supported: "
            f"{', '.join(SUPPORTED)}. Install packages into this environment before starting "
            "the cluster, or run on Ray with nbdist.init(backend='ray'), which creates them.")


def set_job_env(env: dict[str, Any] | None) -> None:
    """The driver's ``init(runtime_env=...)``, merged under every task and actor it submits."""
    global _job_env
    check(env, "init()")
    if env:
        _refuse_unsupported(env)
    _job_env = dict(env) if env else None
    _wired.clear()
    _packages.clear()


def wire(client: Any, env: dict[str, Any] | None) -> dict[str, Any] | None:
    """The wire form for work submitted by this process with option ``env`` (None: none)."""
    if env is None and _job_env is None:
        return _inherited
    base = _inherited
    if _job_env is not None and _inherited is None:
        base = _wire_of(client, _job_env, None)
    if env is None:
        return base
    return _wire_of(client, env, base)


def _wire_of(client: Any, env: dict[str, Any], base: dict[str, Any] | None) -> dict[str, Any]:
    text = json.dumps(env, sort_keys=True, default=repr) + (base["key"] if base else "")
    cached = _wired.get((id(client), text))
    if cached is not None:
        return cached
    _refuse_unsupported(env)
    excludes = list(env.get("excludes") or ())
    out: dict[str, Any] = {
        "env_vars": {**(base or {}).get("env_vars", {}), **(env.get("env_vars") or {})},
        "working_dir": (base or {}).get("working_dir"),
        "py_modules": list((base or {}).get("py_modules", ())),
        "setup_hook": (base or {}).get("setup_hook"),
    }
    if env.get("working_dir"):
        out["working_dir"] = _package(client, _zip_tree(env["working_dir"], excludes, ""))
    if env.get("py_modules") is not None:
        out["py_modules"] = [_package(client, _zip_module(m, excludes))
                             for m in env["py_modules"]]
    hook = env.get("worker_process_setup_hook")
    if hook is not None:
        out["setup_hook"] = hook if isinstance(hook, str) else cloudpickle.dumps(hook)
    digest = hashlib.sha256(json.dumps(
        [sorted(out["env_vars"].items()), out["working_dir"], out["py_modules"],
         hashlib.sha256(out["setup_hook"]).hexdigest()
         if isinstance(out["setup_hook"], bytes) else out["setup_hook"]],
        default=repr).encode()).hexdigest()
    out["key"] = digest[:24]
    _wired[(id(client), text)] = out
    return out


def _package(client: Any, data: bytes) -> tuple[int, str]:
    digest = hashlib.sha256(data).hexdigest()[:32]
    ref = _packages.get((id(client), digest))
    if ref is None:
        ref = _packages[(id(client), digest)] = client.put(data)
    return (ref.id, digest)


def _excluded(rel: str, excludes: list[str]) -> bool:
    name = os.path.basename(rel)
    return name == "__pycache__" or any(
        fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(name, pat) or rel.startswith(
            pat.rstrip("/") + "/") for pat in excludes)


def _zip_tree(path: str, excludes: list[str], prefix: str) -> bytes:
    """A folder (or a .zip of one) as zip bytes with fixed timestamps, so equal content gives
    an equal digest."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"runtime_env working_dir must be a local folder path, not {path!r}.")
    path = _local_path(os.fspath(path), "working_dir")
    if os.path.isfile(path) and path.endswith(".zip"):
        with open(path, "rb") as f:
            return f.read()
    if not os.path.isdir(path):
        raise ValueError(f"runtime_env working_dir {path!r} is not a folder.")
    buf = io.BytesIO()
    total = 0
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, dirs, files in os.walk(path):
            rel_root = os.path.relpath(root, path)
            rel_root = "" if rel_root == "." else rel_root
            dirs[:] = sorted(d for d in dirs
                             if not _excluded(os.path.join(rel_root, d), excludes))
            for name in sorted(files):
                rel = os.path.join(rel_root, name)
                if _excluded(rel, excludes):
                    continue
                total += os.path.getsize(os.path.join(root, name))
                if total > MAX_PACKAGE_BYTES:
                    raise ValueError(
                        f"runtime_env package {path!r} is over {MAX_PACKAGE_BYTES >> 20} MiB; "
                        "leave large files out with runtime_env['excludes'].")
                info = zipfile.ZipInfo(os.path.join(prefix, rel), _EPOCH)
                info.external_attr = 0o644 << 16
                with open(os.path.join(root, name), "rb") as f:
                    zf.writestr(info, f.read(), zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def _local_path(path: str, field: str) -> str:
    """A local path, or the path of a ``file://`` URI on this host (``file:///x``,
    ``file://localhost/x``), as Ray reads one; other URIs are refused."""
    if "://" not in path:
        return path
    url = urllib.parse.urlparse(path)
    if url.scheme != "file" or url.netloc not in ("", "localhost"):
        raise ValueError(f"runtime_env {field} {path!r}: remote URIs are not supported by "
                         "nbdist's engine; give a local path or a file:// URI (it is shipped to "
                         "every node).")
    return "/" + urllib.parse.unquote(url.path).lstrip("/")


def _zip_module(module: Any, excludes: list[str]) -> bytes:
    if isinstance(module, types.ModuleType):
        file = getattr(module, "__file__", None)
        if file is None:
            raise ValueError(f"py_modules: module {module.__name__!r} has no file to ship.")
        module = os.path.dirname(file) if os.path.basename(file) == "__init__.py" else file
    path = os.path.abspath(_local_path(os.fspath(module), "py_modules"))
    if os.path.isfile(path) and path.endswith(".py"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf, open(path, "rb") as f:
            zf.writestr(zipfile.ZipInfo(os.path.basename(path), _EPOCH), f.read())
        return buf.getvalue()
    if os.path.isfile(path) and path.endswith((".zip", ".whl")):
        with open(path, "rb") as f:
            return f.read()
    if not os.path.isdir(path):
        raise ValueError(f"py_modules entry {module!r} is not a folder, .py file or module.")
    return _zip_tree(path, excludes, os.path.basename(path.rstrip(os.sep)))


# ------------------------------------------------------------------------ in the worker
def env_key(extra: dict[str, Any] | None) -> str:
    """The runtime_env key of a task spec's ``extra`` ("" for none)."""
    env = extra.get("runtime_env") if extra else None
    return env["key"] if env else ""


def apply(client: Any, env: dict[str, Any]) -> None:
    """Give this worker process ``env`` (once; the node sends it no other)."""
    global _applied_key, _inherited, _omp_set
    if _applied_key == env["key"]:
        return
    if _applied_key is not None:
        raise RuntimeError("this worker already runs with another runtime_env")
    os.environ.update(env["env_vars"])
    if "OMP_NUM_THREADS" in env["env_vars"]:
        _omp_set = None  # the runtime_env's from now on
    base = _resources_dir(client)
    for oid, digest in env["py_modules"]:
        sys.path.insert(0, _unpack(client, oid, digest, base))
    if env["working_dir"] is not None:
        oid, digest = env["working_dir"]
        path = _unpack(client, oid, digest, base)
        os.chdir(path)
        sys.path.insert(0, path)
    hook = env["setup_hook"]
    if isinstance(hook, str):
        module, _, name = hook.rpartition(".")
        getattr(importlib.import_module(module), name)()
    elif hook is not None:
        cloudpickle.loads(hook)()
    _applied_key, _inherited = env["key"], env


def enter_task(client: Any, spec: tuple) -> None:
    """Before a task runs in this worker: its runtime_env (`apply`), then Ray's
    OMP_NUM_THREADS for a task or an actor's constructor: its CPUs (rounded down, at least 1;
    1 when it holds none), unless the process's environment or the runtime_env set it. The
    value set for one task is replaced for the next, whatever its CPUs."""
    global _omp_set
    extra = spec[P.S_EXTRA]
    env = extra.get("runtime_env") if extra else None
    if env:
        apply(client, env)
    method = spec[P.S_METHOD]
    if method is not None and method != P.ACTOR_INIT:
        return
    current = os.environ.get("OMP_NUM_THREADS")
    if current is not None and current != _omp_set:
        return  # the user's (the process's environment, env_vars, or the task itself)
    cpus = 1.0
    for name, amount in spec[P.S_RESOURCES] or ():  # None: a task's default
        if name == "CPU" or name.startswith("CPU_group_"):  # a bundle's forms: the same amount
            cpus = amount
    value = str(max(int(cpus), 1))
    if value != current:
        os.environ["OMP_NUM_THREADS"] = value
    _omp_set = value


def _resources_dir(client: Any) -> str:
    address = str(client.info.get("local_address", ""))
    if address.startswith("unix:"):
        return os.path.join(os.path.dirname(address[5:]), "runtime_resources")
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"nbdist-runtime-{client.info.get('node_id')}")


def _unpack(client: Any, oid: int, digest: str, base: str) -> str:
    """The package's folder on this node, unpacked by the first worker that needs it."""
    from nbdist.objects.refs import ObjectRef

    return unpack_once(base, digest, lambda: client.get([ObjectRef(oid)], 300.0)[0])


def unpack_once(base: str, digest: str, fetch: Any) -> str:
    """``base/digest``, the package's folder: unpacked from the zip ``fetch()`` returns by the
    first worker of this node that needs it (both backends)."""
    target = os.path.join(base, digest)
    if os.path.isdir(target):
        return target
    data = fetch()
    os.makedirs(base, mode=0o700, exist_ok=True)
    tmp = f"{target}.tmp-{os.getpid()}"
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(tmp)
    try:
        os.rename(tmp, target)
    except OSError:  # another worker of this node unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target
