"""Choosing a backend: errors that need no running cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
