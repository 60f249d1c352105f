"""``py_modules`` and ``working_dir`` given as ``file://`` URIs of this host (``file:///x``,
``file://localhost/x``), as a driver may give them to Ray's ``init``; a URI of another host
is refused where it is given."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import nbdist

pytestmark = pytest.mark.timeout(120)

GET_S = 60.0


@nbdist.remote
def use_file_uri_module() -> tuple[str, str]:
    import uri_shipped_pkg

    with open("data.txt") as f:
        return uri_shipped_pkg.hello(), f.read()


def test_file_uris_of_this_host_are_local_paths(cluster, tmp_path: Path) -> None:
    pkg = tmp_path / "mods" / "uri_shipped_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        def hello():
            return "hello through a file URI"
    """))
    wd = tmp_path / "a dir"
    wd.mkdir()
    (wd / "data.txt").write_text("from a file URI")
    for prefix in ("file://localhost/", "file://"):
        env = {"py_modules": [prefix + str(pkg)],
               "working_dir": prefix + str(wd).replace(" ", "%20")}
        assert nbdist.get(use_file_uri_module.options(runtime_env=env).remote(),
                          timeout=GET_S) == ("hello through a file URI", "from a file URI")


def test_uris_of_other_hosts_are_refused(cluster) -> None:
    env = {"py_modules": ["file://elsewhere/tmp/pkg"]}
    with pytest.raises(ValueError, match="remote URIs are not supported"):
        nbdist.get(use_file_uri_module.options(runtime_env=env).remote(), timeout=GET_S)
