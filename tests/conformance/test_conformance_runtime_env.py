"""``runtime_env`` on tasks and actors, on both backends (on Ray, Ray's own runtime
environments): env_vars, working_dir with excludes, py_modules, worker_process_setup_hook; work
with different runtime environments never shares a worker process."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

import nbdist as ray

pytestmark = pytest.mark.timeout(300)


@ray.remote
def env_and_pid(name):
    return os.environ.get(name), os.getpid()


@ray.remote
def read_working_dir():
    import wd_helper

    with open("data.txt") as f:
        data = f.read().strip()
    return data, wd_helper.VALUE, os.path.exists(os.path.join("big", "blob.bin"))


@ray.remote
def use_module():
    import shipped_pkg

    return shipped_pkg.hello(), os.environ.get("SETUP_HOOK_RAN")


@ray.remote
class EnvActor:
    def get(self, name):
        return os.environ.get(name)


def _setup_hook():
    os.environ["SETUP_HOOK_RAN"] = "yes"


def test_env_vars_on_tasks_and_actors(backend: str) -> None:
    value, pid = ray.get(env_and_pid.options(
        runtime_env={"env_vars": {"NBDIST_CONF_VAR": "on"}}).remote("NBDIST_CONF_VAR"))
    assert value == "on"
    # Tasks without it never run in that process, nor see the variable.
    plain = ray.get([env_and_pid.remote("NBDIST_CONF_VAR") for _ in range(6)])
    assert all(v is None and p != pid for v, p in plain)
    actor = EnvActor.options(runtime_env={"env_vars": {"NBDIST_ACTOR_VAR": "a"}}).remote()
    assert ray.get(actor.get.remote("NBDIST_ACTOR_VAR")) == "a"


def test_working_dir_is_shipped_and_is_the_cwd(backend: str, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("from the working dir\n")
    (tmp_path / "wd_helper.py").write_text("VALUE = 7\n")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "blob.bin").write_bytes(b"x" * 1000)
    env = {"working_dir": str(tmp_path), "excludes": ["big"]}
    assert ray.get(read_working_dir.options(runtime_env=env).remote()) == (
        "from the working dir", 7, False)


def test_py_modules_and_setup_hook(backend: str, tmp_path: Path) -> None:
    pkg = tmp_path / "shipped_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        def hello():
            return "hello from a shipped module"
    """))
    env = {"py_modules": [str(pkg)], "worker_process_setup_hook": _setup_hook}
    assert ray.get(use_module.options(runtime_env=env).remote()) == (
        "hello from a shipped module", "yes")


def test_bad_runtime_env_fails_where_given(backend: str) -> None:
    with pytest.raises(TypeError, match="env_vars"):
        env_and_pid.options(runtime_env={"env_vars": {"A": 1}})
    with pytest.raises(ValueError, match="working_dir"):
        env_and_pid.options(runtime_env={"workdir": "."})


def test_runtime_env_class_is_the_dict_an_option_takes(backend: str) -> None:
    from nbdist.runtime_env import RuntimeEnv, RuntimeEnvConfig

    env = RuntimeEnv(env_vars={"NBDIST_CLASS_VAR": "typed"},
                     config=RuntimeEnvConfig(setup_timeout_seconds=120))
    assert env == {"env_vars": {"NBDIST_CLASS_VAR": "typed"},
                   "config": {"setup_timeout_seconds": 120, "eager_install": True}}
    value, _ = ray.get(env_and_pid.options(runtime_env=env).remote("NBDIST_CLASS_VAR"))
    assert value == "typed"
    with pytest.raises(ValueError, match="env_vars"):
        RuntimeEnv(env_var={"NBDIST_CLASS_VAR": "typo"})


def test_cloudpickle_is_reachable_as_in_ray(backend: str) -> None:
    from nbdist import cloudpickle

    square = cloudpickle.loads(cloudpickle.dumps(lambda x: x * x))
    assert ray.get(ray.remote(lambda f: f(7)).remote(square)) == 49
