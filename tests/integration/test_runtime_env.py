"""Runtime environments on nbdist's engine: the job's runtime_env from ``init``, inheritance
and merging for nested work, one pool of workers per runtime_env, packages unpacked once per
node in the session directory, and a clear error for what the engine cannot build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import nbdist

pytestmark = [pytest.mark.timeout(120), pytest.mark.nbdist_only]


@nbdist.remote
def env_of(*names: str) -> tuple:
    return tuple(os.environ.get(n) for n in names) + (os.getpid(),)


@nbdist.remote
def nested(*names: str) -> tuple:
    return nbdist.get(env_of.remote(*names)), nbdist.get(
        env_of.options(runtime_env={"env_vars": {"NESTED": "n"}}).remote(*names))


@nbdist.remote
def cwd() -> str:
    return os.getcwd()


@pytest.fixture
def job_env_cluster() -> object:
    if nbdist.is_initialized():
        nbdist.shutdown()
    info = nbdist.init(num_cpus=2, runtime_env={"env_vars": {"JOB": "j", "X": "job"}})
    try:
        yield info
    finally:
        nbdist.shutdown()


def test_the_jobs_runtime_env_is_inherited_and_merged(job_env_cluster: dict) -> None:
    assert nbdist.get(env_of.remote("JOB", "X"))[:2] == ("j", "job")
    merged = nbdist.get(env_of.options(runtime_env={"env_vars": {"X": "task"}}).remote(
        "JOB", "X"))
    assert merged[:2] == ("j", "task")
    inherited, overridden = nbdist.get(nested.options(
        runtime_env={"env_vars": {"X": "parent"}}).remote("JOB", "X", "NESTED"))
    assert inherited[:3] == ("j", "parent", None)
    assert overridden[:3] == ("j", "parent", "n")


def test_workers_are_never_shared_between_runtime_envs(fresh_cluster: dict) -> None:
    a = {"env_vars": {"WHICH": "a"}}
    b = {"env_vars": {"WHICH": "b"}}
    refs = [env_of.options(runtime_env=env).remote("WHICH") for env in (a, b, None) * 4]
    seen: dict[int, set] = {}
    for value, pid in nbdist.get(refs):
        seen.setdefault(pid, set()).add(value)
    assert all(len(values) == 1 for values in seen.values()), seen
    assert {v for values in seen.values() for v in values} == {"a", "b", None}


def test_a_package_is_unpacked_once_per_node_in_the_session_dir(
        no_cluster: None, tmp_path: Path) -> None:
    info = nbdist.init(num_cpus=2)
    (tmp_path / "marker.txt").write_text("here")
    env = {"working_dir": str(tmp_path)}
    dirs = set(nbdist.get([cwd.options(runtime_env=env).remote() for _ in range(6)]))
    assert len(dirs) == 1
    [where] = dirs
    assert where.startswith(os.path.join(info["session_dir"], "runtime_resources") + os.sep)
    assert (Path(where) / "marker.txt").read_text() == "here"


@pytest.mark.parametrize("field", ["pip", "conda", "uv", "container"])
def test_environments_the_engine_cannot_build_fail_clearly(
        fresh_cluster: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"'{field}' are not supported.*Supported: env_vars"):
        env_of.options(runtime_env={field: ["requests"]}).remote("X")
    with pytest.raises(ValueError, match="remote URIs"):
        env_of.options(runtime_env={"working_dir": "s3://bucket/pkg.zip"}).remote("X")
