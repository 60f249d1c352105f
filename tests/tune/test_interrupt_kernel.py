"""Interrupting a kernel that runs ``Tuner.fit``: through a real IPython kernel.

The search stops, its trial processes are gone, ``fit()`` returns the partial ResultGrid (as
Ray Tune's does) and the kernel goes on working without a restart.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)

_HERE = Path(__file__).resolve().parent


def _kernel_session() -> Any:
    spec = importlib.util.spec_from_file_location(
        "kernel_session", _HERE.parent / "jupyter" / "kernel_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kernel() -> Iterator[Any]:
    ks = _kernel_session()
    session = ks.start_kernel()
    try:
        session.ok("%load_ext nbdist\n%nbdist start --num-cpus 2\nimport nbdist\n"
                   "from nbdist import tune")
        yield session
    finally:
        ks.stop_kernel(session)


ENDLESS = '''
import os, time
from pathlib import Path
def endless(config):
    Path(PIDS, str(os.getpid())).touch()
    i = 0
    while True:
        i += 1
        tune.report({"i": i})
        time.sleep(0.02)  # deliberate sleep: a step of a trial that runs until interrupted
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_interrupt_stops_the_search_and_returns_partial_results(kernel: Any,
                                                                 tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    kernel.ok(ENDLESS.replace("PIDS", repr(str(pids))))
    cell = kernel.submit(
        "grid = tune.Tuner(endless, param_space={'i': tune.grid_search([0, 1, 2, 3])},\n"
        f"    run_config=tune.RunConfig(storage_path={str(tmp_path / 'results')!r}, verbose=1)"
        ").fit()\n"
        "print('statuses', sorted(r.status for r in grid))\n"
        "print('iterations', min(r.metrics.get('training_iteration', 0) for r in grid "
        "if r.status == 'PAUSED'))")
    kernel.wait_for(lambda: len(list(pids.iterdir())) == 2, 60, "two trials running")
    trial_pids = [int(p.name) for p in pids.iterdir()]
    kernel.wait_for(lambda: all(_alive(p) for p in trial_pids), 10, "trial processes alive")
    kernel.km.interrupt_kernel()
    reply = kernel.reply(cell)
    assert reply["content"]["status"] == "ok", reply["content"]
    text = kernel.text_for(cell)
    assert "statuses ['PAUSED', 'PAUSED', 'PENDING']" in text, text
    assert "RUNNING" not in text  # in a kernel the live view replaces the text status
    kernel.wait_for(lambda: not any(_alive(p) for p in trial_pids), 10,
                    "the trials' processes to end")
    out = kernel.ok("def quick(config):\n    tune.report({'x': config['x']})\n"
                    "g = tune.Tuner(quick, param_space={'x': tune.grid_search([1, 2])},\n"
                    f"    run_config=tune.RunConfig(storage_path={str(tmp_path / 'r2')!r}))"
                    ".fit()\nprint(sorted(r.metrics['x'] for r in g))")
    assert out.strip().endswith("[1, 2]")
