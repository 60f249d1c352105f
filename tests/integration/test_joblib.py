"""joblib's ``Parallel`` on nbdist: ``nbdist.util.joblib.register_ray()`` then
``joblib.parallel_backend("ray")`` runs joblib's batches as tasks of the cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import joblib
import pytest
from polling import poll, until

import nbdist
from nbdist.cluster.lifetime import process_running
from nbdist.util.joblib import register_ray

pytestmark = pytest.mark.timeout(120)


def square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_calls_run_as_tasks_on_the_clusters_workers(small_cluster: Any) -> None:
    register_ray()
    with joblib.parallel_backend("ray"):
        out = joblib.Parallel(n_jobs=-1)(joblib.delayed(square)(i) for i in range(300))
    assert [value for value, _ in out] == [i * i for i in range(300)]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids
    workers = {w.pid for w in nbdist.util.state.list_workers()}
    assert pids <= workers, (pids, workers)
    # The same through parallel_config, the other name, and unordered generators.
    with joblib.parallel_config(backend="nbdist", n_jobs=2):
        gen = joblib.Parallel(return_as="generator_unordered")(
            joblib.delayed(square)(i) for i in range(20))
        assert sorted(value for value, _ in gen) == [i * i for i in range(20)]


def test_n_jobs_minus_one_is_every_cpu_of_the_cluster(small_cluster: Any) -> None:
    from nbdist.util.joblib.backend import NbdistBackend

    backend = NbdistBackend()
    assert backend.effective_n_jobs(-1) == 2  # small_cluster's CPUs
    assert backend.effective_n_jobs(-2) == 1
    assert backend.effective_n_jobs(3) == 3
    with pytest.raises(ValueError, match="n_jobs == 0"):
        backend.effective_n_jobs(0)


def test_ray_remote_args_are_the_tasks_options(small_cluster: Any) -> None:
    register_ray()

    def marked(_: int) -> str:
        return os.environ.get("JOBLIB_MARK", "")

    args = {"runtime_env": {"env_vars": {"JOBLIB_MARK": "from-options"}},
            "resources": {"special": 1}}
    with joblib.parallel_backend("ray", ray_remote_args=args):
        out = joblib.Parallel(n_jobs=2)(joblib.delayed(marked)(i) for i in range(6))
    assert out == ["from-options"] * 6


def test_an_error_reaches_the_caller_and_the_rest_is_cancelled(small_cluster: Any,
                                                               tmp_path: Path) -> None:
    register_ray()
    marks = str(tmp_path)

    def call(i: int) -> int:
        if i == 0:
            until(lambda: len(os.listdir(marks)) >= 1, timeout=60)
            raise KeyError("call 0 failed")
        open(os.path.join(marks, str(os.getpid())), "w").close()
        until(lambda: False, timeout=90)  # held: only a cancel ends it in time
        return i

    with pytest.raises(KeyError, match="call 0 failed"), joblib.parallel_backend("ray"):
        joblib.Parallel(n_jobs=2, batch_size=1)(joblib.delayed(call)(i) for i in range(4))
    held = [int(name) for name in os.listdir(marks)]
    assert held
    poll(lambda: not any(process_running(pid) for pid in held), timeout=60,
         what="the workers of the batches still running after the error to be stopped")
    # The cluster is usable at once afterwards.
    with joblib.parallel_backend("ray"):
        assert joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(-i) for i in range(4)) == [
            0, 1, 2, 3]


@pytest.mark.timeout(300)  # each worker imports scikit-learn: slow on a loaded machine
def test_scikit_learn_fits_in_parallel_on_the_cluster(small_cluster: Any) -> None:
    from sklearn.datasets import load_iris
    from sklearn.model_selection import cross_val_score
    from sklearn.svm import SVC

    register_ray()
    x, y = load_iris(return_X_y=True)
    with joblib.parallel_backend("ray"):
        scores = cross_val_score(SVC(), x, y, cv=5, n_jobs=-1)
    assert len(scores) == 5 and scores.mean() > 0.9


def test_without_joblib_register_ray_says_what_to_install() -> None:
    done = subprocess.run([sys.executable, "-c", """
import sys
sys.modules["joblib"] = None  # as if it were not installed
from nbdist.util.joblib import register_ray
try:
    register_ray()
except ImportError as exc:
    print(exc)
"""], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "nbdist.util.joblib needs joblib, which is not installed" in done.stdout
    assert "pip install joblib" in done.stdout
