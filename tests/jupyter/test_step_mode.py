"""Step-through mode in a real kernel: ``%nbdist step ...``, ``nbdist.step_mode`` / ``nbdist.step``
and the panel's route, a custom message on the kernel's control channel that is answered while
a cell is blocked in ``get`` on a held task.

That a held task has not run is shown by time stamps: each task returns the wall-clock time
it ran at, compared with the time a cell took after submitting it and before releasing it."""

from __future__ import annotations

import queue
from typing import Any

from kernel_session import KernelSession
from polling import poll

DEFS = """
import time
import nbdist
@nbdist.remote
def stamp(x=0):
    return time.time()
@nbdist.remote
def add(a, b):
    return a + b
"""


def control(kernel: KernelSession, command: str, count: int = 1) -> dict[str, Any]:
    """Send the panel's step request on the control channel; its reply's content."""
    client = kernel.client
    msg = client.session.msg("nbdist_step_request", {"command": command, "count": count})
    client.control_channel.send(msg)

    def reply() -> dict[str, Any] | None:
        try:
            got = client.get_control_msg(timeout=0.1)
        except queue.Empty:
            return None
        return got if got["parent_header"].get("msg_id") == msg["header"]["msg_id"] else None

    got = poll(reply, timeout=30, interval=0, what=f"the reply to {command!r}")
    assert got["msg_type"] == "nbdist_step_reply"
    return got["content"]


def test_held_tasks_run_only_when_stepped(kernel: KernelSession) -> None:
    kernel.ok(DEFS)
    out = kernel.ok("%nbdist step on")
    assert "step-through mode on" in out
    kernel.ok("refs = [stamp.remote(i) for i in range(3)]")
    kernel.ok("t_first = time.time()")
    out = kernel.ok("%nbdist step")
    assert "released 1 task (stamp); 2 held." in out, out
    kernel.ok("t_rest = time.time()\n"
              "first = nbdist.get(refs[0])\n"
              "assert first >= t_first, (first, t_first)")
    out = kernel.ok("%nbdist step 2")
    assert "released 2 tasks (stamp ×2); 0 held." in out, out
    kernel.ok("assert all(t >= t_rest for t in nbdist.get(refs[1:]))")
    out = kernel.ok("%nbdist run")
    assert "step-through mode off" in out
    # Held tasks are on the event stream for the panel.
    kernel.ok("held = [e for e in nbdist.events.recent() if e.kind == 'task_held']\n"
              "assert len(held) == 3 and {e.name for e in held} == {'stamp'}, held")


def test_level_steps_release_exactly_the_ready_set(kernel: KernelSession) -> None:
    kernel.ok(DEFS)
    kernel.ok("%nbdist step on")
    kernel.ok("leaves = [add.remote(i, i) for i in range(4)]\n"
              "pairs = [add.remote(leaves[0], leaves[1]), add.remote(leaves[2], leaves[3])]\n"
              "root = add.remote(*pairs)")
    outs = [kernel.ok("%nbdist step level") for _ in range(3)]
    # Each step waits for its level to end; what that made ready is held by then.
    assert ["released 4 tasks (add ×4); 2 held." in outs[0],
            "released 2 tasks (add ×2); 1 held." in outs[1],
            "released 1 task (add); 0 held." in outs[2]] == [True] * 3, outs
    assert kernel.ok("print(nbdist.get(root))").strip() == "12"
    out = kernel.ok("%nbdist step level")
    assert "released 0 tasks; 0 held." in out, out
    kernel.ok("%nbdist step off")


def test_dependencies_and_actor_call_order_are_kept(kernel: KernelSession) -> None:
    kernel.ok(DEFS + """
@nbdist.remote
class Log:
    def __init__(self):
        self.items = []
    def add(self, x):
        self.items.append(x)
        return list(self.items)
log = Log.remote()
nbdist.get(log.add.remote(-1))  # (later calls would go over a direct link)
""")
    kernel.ok("s = nbdist.step_mode(True)\n"
              "calls = [log.add.remote(i) for i in range(4)]\n"
              "chain = add.remote(1, 1)\n"
              "for _ in range(3):\n"
              "    chain = add.remote(chain, 1)\n"
              "status = nbdist.step(1)\n"
              "assert status.held == 4, status  # 3 calls and the first add: the rest wait\n"
              "status = nbdist.step(4)\n"
              "assert status.held == 1, status  # the chain's next add\n"
              "for _ in range(3):\n"
              "    nbdist.step(1)\n"
              "assert nbdist.get(chain) == 5\n"
              "assert nbdist.get(calls[-1]) == [-1, 0, 1, 2, 3]\n"
              "assert not nbdist.step_mode(False).on")


def test_get_waits_and_returns_after_a_step_on_the_control_channel(
        kernel: KernelSession) -> None:
    kernel.ok(DEFS)
    assert control(kernel, "on") == {"status": "ok", "on": True, "held": 0, "released": 0}
    cell = kernel.submit("r = stamp.remote()\nprint('got', nbdist.get(r) >= 0)")
    # The cell is blocked in get on the held task: the shell is busy, the control channel
    # still answers. Steps sent before the cell submitted its task release nothing.
    reply = poll(lambda: (r := control(kernel, "step"))["released"] == 1 and r, timeout=30,
                 what="a step on the control channel to release the cell's task")
    assert reply == {"status": "ok", "on": True, "held": 0, "released": 1}
    kernel.reply(cell, timeout=30)
    kernel.wait_idle(cell, 30)
    assert kernel.text_for(cell).strip() == "got True"
    assert control(kernel, "run") == {"status": "ok", "on": False, "held": 0, "released": 0}


def test_control_level_and_run_while_blocked(kernel: KernelSession) -> None:
    kernel.ok(DEFS)
    control(kernel, "on")
    cell = kernel.submit("leaves = [add.remote(i, 1) for i in range(4)]\n"
                         "root = add.remote(add.remote(leaves[0], leaves[1]),"
                         " add.remote(leaves[2], leaves[3]))\n"
                         "print('root', nbdist.get(root))")
    # ("on" again releases nothing: it reads how many are held, until the cell made all 4.)
    poll(lambda: control(kernel, "on")["held"] == 4, timeout=30, what="the four leaves held")
    assert control(kernel, "level")["released"] == 4
    reply = control(kernel, "run")
    assert reply["status"] == "ok" and reply["on"] is False
    kernel.reply(cell, timeout=30)
    kernel.wait_idle(cell, 30)
    assert kernel.text_for(cell).strip() == "root 10"


def test_the_mode_off_changes_nothing(kernel: KernelSession) -> None:
    kernel.ok(DEFS)
    out = kernel.ok("%nbdist step")
    assert "step-through mode is off" in out
    kernel.ok("refs = [add.remote(i, 1) for i in range(20)]\n"
              "assert nbdist.get(refs) == list(range(1, 21))\n"
              "assert not [e for e in nbdist.events.recent() if e.kind == 'task_held']")
    # On and off again: tasks run at once, nothing is held.
    kernel.ok("nbdist.step_mode(True); nbdist.step_mode(False)\n"
              "assert nbdist.get(add.remote(2, 3)) == 5\n"
              "assert not [e for e in nbdist.events.recent() if e.kind == 'task_held']")


def test_bad_step_arguments_are_usage_errors(kernel: KernelSession) -> None:
    content, _ = kernel.execute("%nbdist step sideways")
    assert content["status"] == "error" and "expected on, off, run, level" in content["evalue"]
    content, _ = kernel.execute("nbdist.step(0)")
    assert content["status"] == "error" and content["ename"] == "ValueError"
    assert control(kernel, "sideways")["status"] == "error"
