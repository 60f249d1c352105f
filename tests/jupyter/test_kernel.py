"""The notebook layer in a real kernel: output routing, errors, magics, display, Out[] rule.

All tests here share one kernel (with a 2-CPU cluster): none of them breaks it. Interrupts and
crashes, which do, are in test_kernel_lifecycle.py.
"""

from __future__ import annotations

import re

import pytest
from kernel_session import KernelSession

pytestmark = pytest.mark.timeout(120)

SLOW = """%%remote
import time

def slow_print(text, delay):
    time.sleep(delay)
    print(text)
    return text
"""


def _errors(k: KernelSession, msg_id: str) -> list[dict]:
    return [m["content"] for m in k.messages_for(msg_id) if m["msg_type"] == "error"]


def test_print_from_a_task_finishing_after_its_cell_reaches_that_cell(
        shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok(SLOW)
    _, first = k.execute("ref = slow_print.remote('late hello', 1.0)")
    # The first cell is finished; the print arrives while this one runs (or after it).
    second_out = k.ok("x = 1 + 1\nprint('second cell')")
    k.wait_for(lambda: "late hello" in k.text_for(first), 20, "the late print in cell 1")
    assert "(slow_print pid=" in k.text_for(first)
    assert "late hello" not in second_out


def test_nested_task_output_goes_to_the_submitting_cell(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok(SLOW)
    k.ok("%%remote\nimport nbdist\ndef outer(text):\n"
         "    return nbdist.get(slow_print.remote(text, 0))\n")
    _, cell = k.execute("nbdist.get(outer.remote('from the nested task'))")
    k.wait_for(lambda: "from the nested task" in k.text_for(cell), 20, "the nested print")


def test_actor_method_output_goes_to_the_calling_cell(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok("%%remote\nclass Talker:\n    def say(self, text):\n        print('actor says', text)\n"
         "        return len(text)\n")
    k.ok("talker = Talker.remote()\nnbdist.get(talker.say.remote('warm-up'))")
    _, cell = k.execute("nbdist.get(talker.say.remote('hello from the actor'))")
    k.wait_for(lambda: "actor says hello from the actor" in k.text_for(cell), 20,
               "the actor's print in the calling cell")
    _, other = k.execute("print('quiet cell')")
    assert "hello from the actor" not in k.text_for(other)


def test_remote_value_error_shows_as_value_error_with_the_cells_line(
        shared_kernel: KernelSession) -> None:
    k = shared_kernel
    content, define = k.execute(
        "%%remote\ndef fails(x):\n    y = x + 1\n    raise ValueError(f'bad value {y}')\n")
    assert content["status"] == "ok"
    define_count = content["execution_count"]
    content, call = k.execute("nbdist.get(fails.remote(1))")
    assert content["status"] == "error"
    [error] = _errors(k, call)
    assert error["ename"] == "ValueError"
    assert error["evalue"] == "bad value 2"
    text = "\n".join(error["traceback"])
    assert f"Cell In[{define_count}], line 3, in fails" in text
    assert "raise ValueError(f'bad value {y}')" in text
    assert "runtime.py" not in text and "api.py" not in text
    # Still catchable as the user's type in the notebook.
    assert "caught" in k.ok("try:\n    nbdist.get(fails.remote(1))\n"
                            "except ValueError:\n    print('caught')")


def test_bad_flags_raise_usage_error_listing_valid_ones(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    for line in ("%nbdist --bogus", "%nbdist start --num-cpus many",
                 "%nbdist start --resources '[1]'", "%%remote --nope\ndef f(): pass"):
        content, msg_id = k.execute(line)
        assert content["status"] == "error" and content["ename"] == "UsageError", line
    content, msg_id = k.execute("%nbdist --bogus")
    usage = k.text_for(msg_id, "stderr")
    assert "{start,status," in usage and ",stop," in usage
    assert "--num-cpus" in k.ok("%nbdist start --help")


def test_an_unknown_flag_of_a_command_shows_that_commands_usage(
        shared_kernel: KernelSession) -> None:
    k = shared_kernel
    content, msg_id = k.execute("%nbdist start --bogus")
    assert content["status"] == "error" and content["ename"] == "UsageError"
    shown = k.text_for(msg_id, "stderr")
    assert "%nbdist start: unrecognized arguments: --bogus" in shown
    assert "usage: %nbdist start" in shown and "--num-cpus" in shown and "--address" in shown
    assert "{start,status,stop" not in shown


def test_remote_cell_makes_functions_and_classes_remote(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    # A class and a closure factory from earlier plain cells, a global of the remote cell.
    k.ok("class Base:\n    offset = 10\n"
         "def make_adder(n):\n    def add(x):\n        return x + n * scale\n    return add\n")
    k.ok("%%remote --num-cpus 1 --max-restarts 1\nscale = 3\n"
         "def apply(x):\n    return make_adder(2)(x)\n"
         "class Counter(Base):\n    def __init__(self):\n        self.n = self.offset\n"
         "    def incr(self):\n        self.n += 1\n        return self.n\n")
    out = k.ok("c = Counter.remote()\nnbdist.get(c.incr.remote())\n"
               "print(type(apply).__name__, type(Counter).__name__, nbdist.get(apply.remote(1)),"
               " nbdist.get(c.incr.remote()))")
    assert out.split() == ["RemoteFunction", "ActorClass", "7", "12"]
    # Names bound before and not redefined by the cell stay as they were.
    assert k.ok("print(type(Base).__name__, type(make_adder).__name__)").split() == [
        "type", "function"]


def test_object_ref_html_repr_and_out_history(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok("big = nbdist.put(bytes(300_000))\nnbdist.get(big)")
    _, cell = k.execute("big")
    [result] = [m["content"] for m in k.messages_for(cell) if m["msg_type"] == "execute_result"]
    html = result["data"]["text/html"]
    assert 'data-state="finished"' in html and "KiB" in html
    count = result["execution_count"]
    out = k.ok(f"print({count} in Out, any(isinstance(v, nbdist.ObjectRef) "
               "for v in (_, __, ___)))")
    assert out.split() == ["False", "False"]
    # A ref made in the displaying cell itself already knows its state.
    _, cell = k.execute("nbdist.put(1)")
    [result] = [m["content"] for m in k.messages_for(cell) if m["msg_type"] == "execute_result"]
    assert 'data-state="finished"' in result["data"]["text/html"]
    # Nothing else holds that ref: the object is freed, the history did not pin it.
    oid = re.fullmatch(r"ObjectRef\((\w+)\)", result["data"]["text/plain"])[1]
    out = k.ok("from polling import until\nfrom nbdist import events\n"
               "def freed():\n    return any(isinstance(e, events.ObjectFreed) and "
               f"e.object_id == {oid!r} for e in events.recent())\n"
               "print(bool(until(freed, timeout=10)))")
    assert out.strip() == "True"
    # Results without refs are kept as usual.
    _, cell = k.execute("40 + 2")
    assert k.ok("print(_)").strip() == "42"


def test_long_get_shows_a_progress_bar_that_closes(shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok(SLOW)
    _, cell = k.execute("nbdist.get([slow_print.remote('p', 1.6) for _ in range(2)])")
    views = [m for m in k.messages_for(cell) if m["msg_type"] == "display_data"
             and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]]
    assert len(views) == 1
    model_id = views[0]["content"]["data"]["application/vnd.jupyter.widget-view+json"][
        "model_id"]
    k.wait_for(lambda: any(m["msg_type"] == "comm_close"
                           and m["content"]["comm_id"] == model_id for m in k.iopub),
               10, "the progress bar's widget closed")
    _, quick = k.execute("nbdist.get(slow_print.remote('q', 0))")
    assert not [m for m in k.messages_for(quick) if m["msg_type"] == "display_data"]


def test_status_shows_an_html_table_of_nodes_and_resources(
        shared_kernel: KernelSession) -> None:
    k = shared_kernel
    _, cell = k.execute("%nbdist status")
    [shown] = [m["content"]["data"] for m in k.messages_for(cell)
               if m["msg_type"] == "display_data"]
    table = shown["text/html"]
    # The Counter actor of an earlier test may hold one CPU.
    assert "<table" in table and re.search(r"CPU: [01] used / 2,", table), table
    assert "GiB used /" in table
