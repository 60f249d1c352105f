"""``init(job_config=JobConfig(...))``: the job's runtime env, code search path and namespace,
on a cluster started with ``nbdist start`` (whose workers know nothing of the driver's
``sys.path``) and on a driver's own cluster."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from clusters import Cli, start_head

import nbdist
from nbdist.job_config import JobConfig

pytestmark = pytest.mark.timeout(180)


@pytest.mark.nbdist_only
def test_code_search_path_and_namespace_on_a_started_cluster(cli: Cli, tmp_path: Path) -> None:
    code = tmp_path / "jobcode"
    code.mkdir()
    (code / "jobmod.py").write_text(textwrap.dedent("""
        import nbdist

        @nbdist.remote
        def where():
            import jobmod
            return jobmod.__file__
    """))
    address = start_head(cli, "--num-cpus", "2")
    script = f"""
        import sys
        import nbdist
        from nbdist.job_config import JobConfig

        sys.path.insert(0, {str(code)!r})
        import jobmod
        config = JobConfig(code_search_path=sys.argv[1:], ray_namespace="team-a")
        nbdist.init(address={address!r}, job_config=config)
        print(nbdist.get_runtime_context().namespace)
        try:
            print(nbdist.get(jobmod.where.remote(), timeout=60))
        except Exception as exc:
            print(type(exc).__name__)

        @nbdist.remote
        class Named:
            pass

        Named.options(name="kept", lifetime="detached").remote()
    """
    without = cli.python(script.replace("sys.argv[1:]", "[]"))
    assert without.returncode == 0, without.stderr
    lines = without.stdout.split("\n")
    assert lines[0] == "team-a" and "jobmod" not in lines[1], without.stdout  # not found there
    with_path = cli.python(script.replace("sys.argv[1:]", repr([str(code)])).replace(
        '"kept"', '"kept-2"'))
    assert with_path.returncode == 0, with_path.stderr
    assert with_path.stdout.split("\n")[:2] == ["team-a", str(code / "jobmod.py")]

    # Another job of the namespace finds the actors; init's own namespace wins over the config's.
    lookup = cli.python(f"""
        import nbdist
        from nbdist.job_config import JobConfig

        def found(name):
            try:
                nbdist.get_actor(name)
                return True
            except ValueError:
                return False

        nbdist.init(address={address!r}, job_config=JobConfig(ray_namespace="team-a"))
        print(found("kept"), found("kept-2"))
        nbdist.shutdown()
        nbdist.init(address={address!r}, namespace="team-b",
                    job_config=JobConfig(ray_namespace="team-a"))
        print(nbdist.get_runtime_context().namespace, found("kept"))
    """)
    assert lookup.returncode == 0, lookup.stderr
    assert lookup.stdout.split("\n")[:2] == ["True True", "team-b False"]


def test_the_jobs_runtime_env_applies_to_its_tasks_and_actors(no_cluster: None) -> None:
    config = JobConfig(runtime_env={"env_vars": {"JOB_A": "job", "JOB_B": "job"}})
    nbdist.init(num_cpus=2, job_config=config)

    @nbdist.remote
    def env() -> tuple[str, str]:
        import os

        return os.environ.get("JOB_A", ""), os.environ.get("JOB_B", "")

    @nbdist.remote
    class Actor:
        def env(self) -> tuple[str, str]:
            import os

            return os.environ.get("JOB_A", ""), os.environ.get("JOB_B", "")

    assert nbdist.get(env.remote()) == ("job", "job")
    assert nbdist.get(Actor.remote().env.remote()) == ("job", "job")
    own = env.options(runtime_env={"env_vars": {"JOB_B": "task"}})
    assert nbdist.get(own.remote()) == ("job", "task")  # merged over the job's, key by key
    nbdist.shutdown()

    # init's own runtime_env replaces the config's, as in Ray.
    nbdist.init(num_cpus=2, job_config=config, runtime_env={"env_vars": {"JOB_A": "init"}})
    assert nbdist.get(env.remote()) == ("init", "")


def test_job_config_fields() -> None:
    config = JobConfig(metadata={"owner": "alice"}, code_search_path=("/code",))
    config.set_metadata("run", "7")
    assert config.metadata == {"owner": "alice", "run": "7"}
    assert config.code_search_path == ["/code"] and config.runtime_env == {}
    assert config.ray_namespace is None
    config.set_ray_namespace("x")
    config.set_runtime_env({"env_vars": {"A": "1"}})
    assert (config.ray_namespace, config.runtime_env) == ("x", {"env_vars": {"A": "1"}})
    same = JobConfig.from_json({"runtime_env": {"env_vars": {"A": "1"}}, "ray_namespace": "x",
                                "metadata": {"k": "v"}, "code_search_path": ["/c"]})
    assert (same.runtime_env, same.ray_namespace, same.metadata, same.code_search_path) == (
        {"env_vars": {"A": "1"}}, "x", {"k": "v"}, ["/c"])
    with pytest.raises(TypeError, match="code search path"):
        JobConfig(code_search_path="/code")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be one of"):
        JobConfig(default_actor_lifetime="forever")
    with pytest.raises(NotImplementedError, match="lifetime='detached'"):
        JobConfig(default_actor_lifetime="detached")
    with pytest.raises(TypeError, match="takes a nbdist.job_config.JobConfig"):
        nbdist.init(job_config={"runtime_env": {}})
