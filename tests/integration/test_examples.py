"""The classic Ray examples, written as a Ray user writes them, run on nbdist.

Timing claims are checked relative to one another (tree vs chain) or from timestamps the
tasks record themselves (overlap), never against absolute wall-clock limits.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from polling import until

import nbdist

pytestmark = [pytest.mark.timeout(90), pytest.mark.usefixtures("cluster")]

TASK_TIME = 0.3


@nbdist.remote
def rendezvous(directory: str, me: int, parties: int) -> int:
    # Returns only once `parties` tasks run at the same time, so afterwards that many workers
    # exist and the timing tests below do not measure worker start-up.
    Path(directory, f"arrived-{me}").touch()
    if not until(lambda: len(os.listdir(directory)) >= parties, timeout=60):
        raise TimeoutError(f"only {len(os.listdir(directory))} of {parties} tasks ran at once")
    return os.getpid()


@pytest.fixture
def four_warm_workers(cluster, tmp_path: Path) -> None:
    directory = tmp_path / "rendezvous"
    directory.mkdir()
    pids = nbdist.get([rendezvous.remote(str(directory), i, 4) for i in range(4)])
    assert len(set(pids)) == 4


@nbdist.remote
def add(x: float, y: float) -> float:
    time.sleep(TASK_TIME)
    return x + y


@pytest.mark.usefixtures("four_warm_workers")
def test_tree_reduction_is_faster_than_a_chain() -> None:
    numbers = list(range(1, 9))

    start = time.perf_counter()
    acc = nbdist.put(numbers[0])
    for n in numbers[1:]:
        acc = add.remote(acc, n)
    chain_result = nbdist.get(acc)
    chain_time = time.perf_counter() - start

    start = time.perf_counter()
    level = [nbdist.put(n) for n in numbers]
    while len(level) > 1:
        level = [add.remote(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    tree_result = nbdist.get(level[0])
    tree_time = time.perf_counter() - start

    assert chain_result == tree_result == sum(numbers)
    # 7 task-times against 3; even with generous scheduling noise the tree must clearly win.
    assert tree_time < 0.75 * chain_time, (tree_time, chain_time)


@nbdist.remote
def sleeper(seconds: float) -> tuple[float, float]:
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


@pytest.mark.usefixtures("four_warm_workers")
def test_four_sleeping_tasks_run_together() -> None:
    spans = nbdist.get([sleeper.remote(1.5) for _ in range(4)])
    latest_start = max(start for start, _ in spans)
    earliest_end = min(end for _, end in spans)
    assert latest_start < earliest_end, f"the 4 tasks never all ran at the same time: {spans}"


@nbdist.remote
def double(i: int) -> int:
    return 2 * i


@pytest.mark.timeout(300)
def test_one_hundred_thousand_tiny_tasks() -> None:
    n = 100_000
    refs = [double.remote(i) for i in range(n)]
    results = nbdist.get(refs)
    assert results == [2 * i for i in range(n)]


@nbdist.remote
def finish_in_turn(directory: str, turn: int) -> int:
    # Task `turn` may finish only after the driver has processed task `turn - 1`, so the
    # completion order is fixed without relying on sleep lengths.
    if turn > 0:
        before = Path(directory, f"processed-{turn - 1}")
        if not until(before.exists, timeout=60):
            raise TimeoutError(f"result {turn - 1} was never processed")
    return turn


def test_process_results_in_completion_order(tmp_path: Path) -> None:
    turns = [3, 2, 1, 0]  # submitted in the reverse of the order they finish in
    pending = [finish_in_turn.remote(str(tmp_path), t) for t in turns]
    processed = []
    while pending:
        ready, pending = nbdist.wait(pending, num_returns=1)
        assert len(ready) == 1
        value = nbdist.get(ready[0])
        processed.append(value)
        Path(tmp_path, f"processed-{value}").touch()
    assert processed == [0, 1, 2, 3]


@nbdist.remote
def zeros(shape: tuple[int, int]) -> np.ndarray:
    return np.zeros(shape)


@nbdist.remote
def plus(a: np.ndarray, value: float) -> np.ndarray:
    return a + value


@nbdist.remote
def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.dot(a, b)


def test_numpy_dag() -> None:
    n = 400  # 400 x 400 float64 is 1.28 MB: the matrices travel through shared memory
    a = zeros.remote((n, n))
    b = zeros.remote((n, n))
    product = nbdist.get(multiply.remote(a, b))
    assert product.shape == (n, n)
    assert not product.any()

    product = nbdist.get(multiply.remote(plus.remote(a, 1.0), plus.remote(b, 2.0)))
    np.testing.assert_array_equal(product, np.full((n, n), 2.0 * n))


@nbdist.remote
class Counter:
    def __init__(self) -> None:
        self.value = 0

    def increment(self) -> int:
        self.value += 1
        return self.value

    def read(self) -> int:
        return self.value


def test_four_counter_actors() -> None:
    counters = [Counter.remote() for _ in range(4)]
    for i, counter in enumerate(counters):
        for _ in range(i + 1):
            counter.increment.remote()
    assert nbdist.get([c.read.remote() for c in counters]) == [1, 2, 3, 4]


@nbdist.remote
class ParameterServer:
    def __init__(self, dim: int) -> None:
        self.params = np.zeros(dim)

    def get_params(self) -> np.ndarray:
        return self.params

    def update(self, grad: np.ndarray) -> None:
        self.params = self.params + grad


@nbdist.remote
def train_worker(ps: nbdist.ActorHandle, steps: int, dim: int) -> int:
    for _ in range(steps):
        params = nbdist.get(ps.get_params.remote())
        assert params.shape == (dim,)
        nbdist.get(ps.update.remote(np.ones(dim)))
    return steps


def test_parameter_server() -> None:
    dim, steps, workers = 10, 10, 4
    ps = ParameterServer.remote(dim)
    done = nbdist.get([train_worker.remote(ps, steps, dim) for _ in range(workers)])
    assert done == [steps] * workers
    np.testing.assert_array_equal(nbdist.get(ps.get_params.remote()), np.full(dim, steps * workers))


@nbdist.remote
def square(x: int) -> int:
    return x * x


@nbdist.remote
def total(*values: int) -> int:
    return sum(values)


@nbdist.remote
def pair_sum(x: int, y: int) -> int:
    return x + y


def test_map_then_sum() -> None:
    squares = [square.remote(i) for i in range(64)]
    assert nbdist.get(total.remote(*squares)) == sum(i * i for i in range(64))


def test_map_then_tree_reduce() -> None:
    level = [square.remote(i) for i in range(64)]
    while len(level) > 1:
        level = [pair_sum.remote(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    assert nbdist.get(level[0]) == sum(i * i for i in range(64))


@nbdist.remote
def simulate(experiment: int, trial: int) -> int:
    return experiment * 100 + trial


@nbdist.remote
def run_experiment(experiment: int, trials: int) -> list[int]:
    return nbdist.get([simulate.remote(experiment, t) for t in range(trials)])


def test_experiments_fan_out_simulations() -> None:
    results = nbdist.get([run_experiment.remote(e, 5) for e in range(6)])
    assert results == [[e * 100 + t for t in range(5)] for e in range(6)]
