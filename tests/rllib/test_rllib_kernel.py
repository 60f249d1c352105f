"""Interrupting ``algo.train()`` in a real IPython kernel stops the algorithm: its env-runner
processes end, its placement group is removed, and the kernel goes on (a new algorithm builds
and trains). While it trains, the run is on the event stream as the live view reads it: the
learner with its return curve and the env runners."""

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
        session.ok("%load_ext nbdist\n%nbdist start --num-cpus 3\nimport nbdist\n"
                   "from nbdist.rllib.algorithms.ppo import PPOConfig", timeout=120)
        yield session
    finally:
        ks.stop_kernel(session)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


BUILD = '''
import os
config = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
          .training(train_batch_size=400, minibatch_size=200, num_epochs=1)
          .rl_module(model_config={"fcnet_hiddens": [16]}))
algo = config.build_algo()
pids = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
print("pids", *pids)
'''

TRAIN = '''
from pathlib import Path
iterations = 0
while True:
    algo.train()
    iterations += 1
    Path(MARK).write_text(str(iterations))
'''

AFTER = '''
import nbdist.events as ev
updates = [e for e in ev.recent(raw=True) if getattr(e, "kind", "") == "run_update"
           and e.library == "rllib" and e.run == algo.run_name]
print("members", sorted({e.member for e in updates}))
print("curve", any(dict(e.metrics).get("episode_return_mean") for e in updates
                   if e.member == "learner"))
print("stopped", algo._stopped, algo.env_runner_group.placement_group is None)
again = config.build_algo()
print("again", again.train()["training_iteration"])
again.stop()
'''


def test_interrupting_train_stops_the_algorithm_and_its_runners(kernel: Any,
                                                                tmp_path: Path) -> None:
    out = kernel.ok(BUILD, timeout=120)
    pids = [int(p) for p in out.split("pids", 1)[1].split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    mark = tmp_path / "iterations"
    cell = kernel.submit(TRAIN.replace("MARK", repr(str(mark))))
    kernel.wait_for(lambda: mark.exists() and int(mark.read_text() or 0) >= 2, 120,
                    "two iterations")
    kernel.km.interrupt_kernel()
    reply = kernel.reply(cell, timeout=120)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    kernel.wait_for(lambda: not any(_alive(p) for p in pids), 60,
                    "the env runners' processes to end")
    text = kernel.ok(AFTER, timeout=180)
    assert "members ['env_runner 1', 'env_runner 2', 'learner']" in text, text
    assert "curve True" in text and "stopped True True" in text, text
    assert "again 1" in text, text
