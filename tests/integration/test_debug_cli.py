"""``nbdist debug`` from a second process: a driver script (no terminal, so it takes no
prompt itself) waits on a task paused at ``breakpoint()`` in a cluster started with ``nbdist
start``; ``nbdist debug --list`` lists it, ``nbdist debug f`` reads pdb commands from its stdin,
and ``c`` lets the script's get return the task's value. A second task, ended with ``q``, fails
the script's get with DebuggerQuit. Nothing is left paused."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clusters import NBDIST, Cli, start_head
from polling import poll

pytestmark = [pytest.mark.timeout(180), pytest.mark.nbdist_only]

SCRIPT = """
import nbdist
nbdist.init(address="auto")

@nbdist.remote
def f(x):
    y = x * 3
    breakpoint()
    return y + 1

print("value", nbdist.get(f.remote(5)), flush=True)
try:
    nbdist.get(f.remote(7))
except nbdist.exceptions.DebuggerQuit as exc:
    print("quit:", exc, flush=True)
"""


def debug(cli: Cli, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([NBDIST, "debug", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, env=cli.env)


def listed(cli: Cli, what: str) -> str | None:
    out = debug(cli, "--list").stdout
    return out if what in out else None


def test_debug_command_attaches_from_another_process(cli: Cli, tmp_path: Path) -> None:
    start_head(cli, "--num-cpus", "2")
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(SCRIPT))
    driver = subprocess.Popen([sys.executable, str(script)], env=cli.env,
                              text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        first = poll(lambda: listed(cli, " f "), timeout=90, what="the paused task listed")
        assert "a breakpoint" in first and "pid " in first
        done = debug(cli, "f", stdin="p x, y\nw\nc\n")
        assert done.returncode == 0, done.stderr
        assert "nbdist: task 'f' paused at a breakpoint" in done.stdout
        assert "(5, 15)" in done.stdout
        assert "-> return y + 1" in done.stdout  # the source is read on the worker's machine
        assert "the task runs on" in done.stdout
        poll(lambda: listed(cli, " f "), timeout=90, what="the second task listed")
        done = debug(cli, stdin="p x\nq\n")
        assert "7\n" in done.stdout.split("(Pdb) ")[1] and "the task was ended" in done.stdout
        out, err = driver.communicate(timeout=90)
        assert driver.returncode == 0, err
        assert "value 16" in out
        assert "quit: Task 'f' was ended from the debugger" in out
        assert "No task is paused" in debug(cli, "--list").stdout
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


def test_a_task_on_another_node_pauses_for_the_driver(cli: Cli) -> None:
    """Two nodes: a task placed on the second pauses; its notice reaches the driver on the
    first, whose get relays pdb (the prompt here is the script's own answers)."""
    done = cli.python("""
        import nbdist
        from nbdist.cluster_utils import Cluster
        from nbdist.util import pdb as remote_pdb

        answers = iter(["p x, node", "c"])
        def ask(prompt):
            return next(answers)
        remote_pdb.set_prompt(lambda: (ask, lambda text: print(text, end="", flush=True)))
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1, resources={"beta": 1})
        try:
            nbdist.init(address=cluster.address)

            @nbdist.remote(resources={"beta": 1})
            def there(x):
                node = nbdist.get_runtime_context().get_node_id()
                breakpoint()
                return node

            here = nbdist.get_runtime_context().get_node_id()
            ran = nbdist.get(there.remote(1), timeout=90)
            print("other node:", ran != here, flush=True)
            nbdist.shutdown()
        finally:
            cluster.shutdown()
    """, timeout=150)
    assert done.returncode == 0, done.stderr
    assert "nbdist: task 'there' paused at a breakpoint" in done.stdout
    assert "(1, '" in done.stdout and "other node: True" in done.stdout
