"""A driver's file descriptors: a process that starts and stops clusters again and again (a
notebook that restarts its cluster, a long test run) keeps no descriptor of the clusters it
stopped, and one that holds more than select()'s 1024 descriptors still talks to its cluster."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=150)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout.split()


def test_stopped_clusters_leave_no_descriptor_behind() -> None:
    out = _run("""
        import gc, os
        import nbdist

        class Box:
            def value(self, x):
                return x

        def cycle():
            nbdist.init(num_cpus=1)
            f = nbdist.remote(lambda x: x + 1)
            box = nbdist.remote(Box).remote()
            assert nbdist.get([f.remote(1), box.value.remote(2)]) == [2, 2]
            nbdist.shutdown()

        cycle()
        gc.collect()
        first = len(os.listdir("/proc/self/fd"))
        for _ in range(4):
            cycle()
        gc.collect()
        print(first, len(os.listdir("/proc/self/fd")))
    """)
    first, last = map(int, out)
    assert last <= first, f"{last - first} descriptors more after four more clusters"


def test_a_driver_holding_over_1024_descriptors_still_gets_results() -> None:
    out = _run("""
        import os, resource
        import nbdist

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), max(hard, 4096)))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]

        class Doubler:
            def twice(self, x):
                return 2 * x

        nbdist.init(num_cpus=1)
        f = nbdist.remote(lambda x: x + 1)
        doubler = nbdist.remote(Doubler).remote()
        print(sum(nbdist.get([f.remote(i) for i in range(100)], timeout=60)),
              sum(nbdist.get([doubler.twice.remote(i) for i in range(50)], timeout=60)))
        nbdist.shutdown()
    """)
    assert out == [str(sum(range(1, 101))), str(2 * sum(range(50)))]
