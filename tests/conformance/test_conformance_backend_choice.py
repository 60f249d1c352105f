"""Choosing a backend: errors that need no running cluster."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from polling import poll

pytestmark = pytest.mark.timeout(60)


def test_unknown_backend_is_refused() -> None:
    # In a process of its own: this run's conformance cluster may be up in this one.
    code = ("import nbdist\n"
            "try:\n    nbdist.init(backend='dask')\n"
            "except ValueError as exc:\n    print('ERROR', exc)\n"
            "print('initialized', nbdist.is_initialized())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=50, check=True).stdout
    assert "ERROR" in out and "'nbdist'" in out and "'ray'" in out
    assert "initialized False" in out


def test_without_ray_the_error_says_how_to_install_it() -> None:
    # A None entry in sys.modules makes `import ray` fail as if Ray were not installed.
    code = ("import sys\nsys.modules['ray'] = None\nimport nbdist\n"
            "try:\n    nbdist.init(backend='ray')\n"
            "except ImportError as exc:\n    print('ERROR', exc)\n"
            "print('initialized', nbdist.is_initialized())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=50, check=True).stdout
    assert 'pip install "nbdist[ray]"' in out
    assert "initialized False" in out


def test_the_engine_does_not_import_ray() -> None:
    code = "import sys, nbdist\nprint('ray' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=50, check=True).stdout
    assert out.strip() == "False"


QUERY_BEFORE_INIT = """
import nbdist
for query in ("nodes", "cluster_resources", "available_resources"):
    try:
        getattr(nbdist, query)()
    except nbdist.exceptions.RuntimeNotInitializedError as exc:
        print("REFUSED", query, exc)
    else:
        print("ANSWERED", query)
print("initialized", nbdist.is_initialized())
info = nbdist.init(backend=BACKEND, num_cpus=1)
print("CPU", nbdist.cluster_resources()["CPU"])
print("SESSION", info.get("session_dir", ""))
nbdist.shutdown()
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend_name", ["nbdist", "ray"])
def test_a_query_before_init_raises_and_leaves_init_to_the_user(backend_name: str) -> None:
    # As in Ray: asking about the cluster does not start one, so the init() with the
    # resources the user wants still works afterwards.
    code = f"BACKEND = {backend_name!r}\n{QUERY_BEFORE_INIT}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=170, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    out = done.stdout
    try:
        assert done.returncode == 0, done.stderr[-3000:]
        for query in ("nodes", "cluster_resources", "available_resources"):
            assert f"REFUSED {query} nbdist has not been started yet" in out, out
        assert "Call nbdist.init() first" in out
        assert "initialized False" in out and "CPU 1.0" in out
    finally:
        session = next((line.split(" ", 1)[1] for line in out.splitlines()
                        if line.startswith("SESSION ")), "")
        if backend_name == "ray" and session:
            from nbdist.backends.ray.guard import session_pids

            def left() -> set[int]:
                return session_pids(os.path.realpath(session), set())

            try:
                poll(lambda: not left(), timeout=30, what="the Ray session's processes to exit")
            finally:
                for pid in left():
                    os.kill(pid, 9)
