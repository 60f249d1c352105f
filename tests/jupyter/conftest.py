"""Kernel fixtures for the notebook-layer tests (helpers in kernel_session.py).

``kernel`` is a kernel of the test's own; ``shared_kernel`` one per module for tests that do
not disturb each other. Both have the extension loaded, a 2-CPU cluster started and nbdist imported; they are
always shut down in the finalizer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kernel_session import KernelSession, start_kernel, stop_kernel


def _kernel_with_cluster() -> Iterator[KernelSession]:
    session = start_kernel()
    try:
        session.ok("%load_ext nbdist\n%nbdist start --num-cpus 2\nimport nbdist")
        yield session
    finally:
        stop_kernel(session)


@pytest.fixture
def kernel() -> Iterator[KernelSession]:
    """A fresh kernel of the test's own, extension loaded, a 2-CPU cluster started."""
    yield from _kernel_with_cluster()


@pytest.fixture(scope="module")
def shared_kernel() -> Iterator[KernelSession]:
    """One such kernel for the tests of a module that do not disturb each other."""
    yield from _kernel_with_cluster()
