"""Remote pdb in a real kernel: ``breakpoint()`` in a task or an actor method opens pdb in
the cell waiting on it, through the kernel's stdin (input_request / input_reply, answered here
as a frontend would); ``%nbdist debug`` attaches to a task no cell waits for.

Each test ends with nothing paused: every session is continued or quit, and checked gone with
``%nbdist debug --list``."""

from __future__ import annotations

import queue
import re
from typing import Any

import pytest
from kernel_session import KernelSession
from polling import poll

pytestmark = pytest.mark.timeout(300)

DEFS = """
import nbdist
@nbdist.remote
def f(x):
    y = x + 1
    breakpoint()
    y = y * 10
    return y

@nbdist.remote
class Acc:
    def __init__(self):
        self.total = 0
    def add(self, k):
        import pdb
        before = self.total
        pdb.set_trace()
        self.total += k
        return self.total
"""


class Stdin:
    """Answers the kernel's input requests with ``answers``, in order; keeps the prompts."""

    def __init__(self, kernel: KernelSession) -> None:
        self.kernel = kernel
        self.prompts: list[str] = []

    def answer(self, answers: list[str], timeout: float = 120) -> None:
        for text in answers:
            msg = poll(self._request, timeout=timeout, what=f"an input request (to answer {text!r})")
            self.prompts.append(msg["content"]["prompt"])
            self.kernel.client.input(text)

    def _request(self) -> dict[str, Any] | None:
        try:
            return self.kernel.client.get_stdin_msg(timeout=0.1)
        except queue.Empty:
            return None


def run_with_answers(kernel: KernelSession, code: str, answers: list[str]
                     ) -> tuple[dict[str, Any], str, Stdin]:
    stdin = Stdin(kernel)
    msg_id = kernel.submit(code)
    stdin.answer(answers)
    reply = kernel.reply(msg_id, timeout=120)["content"]
    kernel.wait_idle(msg_id, 60)
    return reply, kernel.text_for(msg_id), stdin


def nothing_paused(kernel: KernelSession) -> None:
    poll(lambda: "No task is paused" in kernel.ok("%nbdist debug --list"), timeout=60,
         what="no task left paused")


def test_breakpoint_in_task_steps_prints_and_continues(shared_kernel: KernelSession) -> None:
    shared_kernel.ok(DEFS)
    reply, out, stdin = run_with_answers(
        shared_kernel, "print('result', nbdist.get(f.remote(4)))",
        ["p x", "n", "p y", "l", "w", "c"])
    assert reply["status"] == "ok", reply
    assert stdin.prompts == ["(Pdb) "] * 6
    assert "nbdist: task 'f' paused at a breakpoint" in out and "pid " in out
    assert "-> y = y * 10" in out
    assert "\n4\n" in out  # p x
    assert "\n50\n" in out  # p y after n
    assert "breakpoint()" in out  # l lists the source
    assert "worker.py" not in out  # w shows the task's frames, not the worker's
    assert "result 50" in out
    nothing_paused(shared_kernel)


def test_quit_ends_the_task_with_a_clear_error(shared_kernel: KernelSession) -> None:
    shared_kernel.ok(DEFS)
    reply, out, _ = run_with_answers(shared_kernel, "nbdist.get(f.remote(1))", ["q"])
    assert reply["status"] == "error"
    assert reply["ename"] == "DebuggerQuit", reply
    assert "ended from the debugger" in reply["evalue"]
    nothing_paused(shared_kernel)


def test_two_paused_tasks_queue_and_an_actor_method(shared_kernel: KernelSession) -> None:
    shared_kernel.ok(DEFS + "acc = Acc.remote()\n")
    code = ("refs = [f.remote(1), acc.add.remote(5)]\n"
            "print('results', nbdist.get(refs))")
    # Whichever pauses first is asked first: print a local that names it, then continue.
    reply, out, stdin = run_with_answers(
        shared_kernel, code, ["p ('X', x) if 'x' in dir() else ('K', k, before)", "c",
                              "p ('X', x) if 'x' in dir() else ('K', k, before)", "c"])
    assert reply["status"] == "ok", reply
    assert "task 'f' paused" in out and "task 'Acc.add' paused" in out
    assert "('X', 1)" in out and "('K', 5, 0)" in out
    assert "results [20, 5]" in out
    nothing_paused(shared_kernel)


def test_debug_magic_attaches_when_no_cell_waits(shared_kernel: KernelSession) -> None:
    shared_kernel.ok(DEFS)
    shared_kernel.ok("ref = f.remote(6)")
    listing = poll(lambda: (t := shared_kernel.ok("%nbdist debug --list")) and "f " in t and t,
                   timeout=60, what="the paused task listed")
    assert "a breakpoint" in listing
    reply, out, _ = run_with_answers(shared_kernel, "%nbdist debug f", ["p x", "c"])
    assert reply["status"] == "ok", reply
    assert "\n6\n" in out and "the task runs on" in out
    assert shared_kernel.ok("print(nbdist.get(ref))").strip() == "70"
    nothing_paused(shared_kernel)
    content, _ = shared_kernel.execute("%nbdist debug")
    assert content["ename"] == "UsageError" and "No task is paused" in content["evalue"]


POST_MORTEM = """
@nbdist.remote
def parse(rows):
    total = 0
    for row in rows:
        total += check(row)
    return total

def check(row):
    width = len(row)
    if width > 2:
        raise ValueError(f"row too wide: {row!r}")
    return width
"""


def test_debug_after_a_failed_cell_opens_the_remote_frames(shared_kernel: KernelSession) -> None:
    shared_kernel.ok("import nbdist\n" + POST_MORTEM)
    content, _ = shared_kernel.execute("nbdist.get(parse.remote(['ab', 'abc']))")
    assert content["status"] == "error" and "ValueError" in content["ename"]
    reply, out, stdin = run_with_answers(
        shared_kernel, "%debug", ["p row, width", "l", "u", "p total, rows", "w", "q"])
    assert reply["status"] == "ok", reply
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # IPython's pdb colours its output
    assert "('abc', 3)" in out  # the locals of the frame that raised
    assert 'raise ValueError(f"row too wide: {row!r}")' in out  # its source
    assert "(2, ['ab', 'abc'])" in out  # the caller's, after u
    assert "parse()" in out and "check()" in out
    # The same through the magic.
    reply, out, _ = run_with_answers(shared_kernel, "%nbdist debug --last", ["p width", "q"])
    assert reply["status"] == "ok", reply
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "\n3\n" in out


def test_live_post_mortem_stops_a_failing_task_at_its_exception(
        shared_kernel: KernelSession) -> None:
    shared_kernel.ok("import nbdist\n" + POST_MORTEM)
    code = ("opts = {'env_vars': {'NBDIST_DEBUG_POST_MORTEM': '1'}}\n"
            "nbdist.get(parse.options(runtime_env=opts).remote(['x', 'wide']))")
    reply, out, _ = run_with_answers(shared_kernel, code, ["p row", "u", "p total", "c"])
    assert reply["status"] == "error" and "ValueError" in reply["ename"]  # it fails after c
    assert "paused at its exception ValueError: row too wide: 'wide'" in out
    assert "'wide'" in out and "\n1\n" in out
    nothing_paused(shared_kernel)


def test_stack_shows_where_a_running_task_is(shared_kernel: KernelSession, tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    shared_kernel.ok(f"""
import os, nbdist
from polling import until
@nbdist.remote
def waits_at_gate():
    def hold_here():
        return until(lambda: os.path.exists({str(gate)!r}), timeout=120)
    return hold_here()
ref = waits_at_gate.remote()
""")
    text = poll(lambda: (t := shared_kernel.ok("%nbdist stack waits_at_gate"))
                and "in hold_here" in t and t, timeout=60, what="the task's stack")
    assert "task 'waits_at_gate'" in text and "thread MainThread" in text
    assert "in waits_at_gate" in text and "return hold_here()" in text
    assert "worker.py" not in text  # the engine's frames are left out
    gate.write_text("open")
    assert shared_kernel.ok("print(nbdist.get(ref))").strip() == "True"
    assert "No task is running" in shared_kernel.ok("%nbdist stack waits_at_gate")


def test_why_names_the_task_that_holds_the_resources(shared_kernel: KernelSession,
                                                     tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    shared_kernel.ok(f"""
import os, nbdist
from polling import until
@nbdist.remote(num_cpus=2)
def hog():
    return until(lambda: os.path.exists({str(gate)!r}), timeout=120)
@nbdist.remote(num_cpus=2)
def starved(x):
    return x
@nbdist.remote
def after(v):
    return v
hogging = hog.remote()
until(lambda: nbdist.available_resources().get("CPU", 0) == 0, timeout=60)
last = after.remote(starved.remote(1))
try:
    nbdist.get(last, timeout=0.5)
except nbdist.exceptions.GetTimeoutError:
    print("timed out")
""")
    text = shared_kernel.ok("%nbdist why")
    assert "The last get()" in text and "waits for 1 of 1" in text
    assert "'after'" in text and "waits for its argument(s)" in text
    assert "'starved'" in text and "not started" in text and "CPU 0/2" in text
    assert "held by task 'hog' running for" in text
    gate.write_text("open")
    assert shared_kernel.ok("print(nbdist.get(last, timeout=60))").strip() == "1"


def test_breakpoint_in_a_train_worker(shared_kernel: KernelSession) -> None:
    shared_kernel.ok("""
import nbdist
from nbdist import train
def loop(config):
    rank = train.get_context().get_world_rank()
    step = 3
    if rank == 0:
        breakpoint()
    train.report({"step": step, "rank": rank})
trainer = train.DataParallelTrainer(loop, scaling_config=train.ScalingConfig(num_workers=2))
""")
    reply, out, _ = run_with_answers(shared_kernel, "print('metrics', trainer.fit().metrics)",
                                     ["p rank, step", "c"])
    assert reply["status"] == "ok", reply
    assert "task 'TrainWorker(rank=0)' paused at a breakpoint" in out
    assert "(0, 3)" in out and "metrics {'step': 3, 'rank': 0}" in out
    nothing_paused(shared_kernel)


def test_interrupting_the_prompt_cancels_the_cells_paused_task(
        shared_kernel: KernelSession) -> None:
    shared_kernel.ok(DEFS)
    msg_id = shared_kernel.submit("interrupted = f.remote(2)\nnbdist.get(interrupted)")
    stdin = Stdin(shared_kernel)
    stdin.answer(["p x"])  # the prompt is up and answers
    poll(stdin._request, timeout=60, what="the next prompt")
    shared_kernel.km.interrupt_kernel()
    reply = shared_kernel.reply(msg_id, timeout=60)["content"]
    assert reply["status"] == "error" and "KeyboardInterrupt" in reply["ename"]
    ended = shared_kernel.ok("try:\n    nbdist.get(interrupted, timeout=60)\n"
                             "except Exception as exc:\n    print('ended:', type(exc).__name__)")
    assert "ended:" in ended and "GetTimeout" not in ended
    nothing_paused(shared_kernel)  # the interrupted cell's paused task was cancelled
    # The interrupted get ended on the event stream too (the views and %nbdist why see it).
    unended = shared_kernel.ok(
        "from nbdist import events as ev\n"
        "print(sorted({e.wait_id for e in ev.recent() if isinstance(e, ev.WaitBegun)}"
        " - {e.wait_id for e in ev.recent() if isinstance(e, ev.WaitDone)}))")
    assert unended.strip() == "[]", unended


def test_why_names_a_placement_group_not_placed_and_a_step_hold(shared_kernel: KernelSession,
                                                                 tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    shared_kernel.ok(f"""
import os, nbdist
from polling import until
from nbdist.util.placement_group import placement_group, remove_placement_group
@nbdist.remote(num_cpus=2)
def hog():
    return until(lambda: os.path.exists({str(gate)!r}), timeout=120)
hogging = hog.remote()
until(lambda: nbdist.available_resources().get("CPU", 0) == 0, timeout=60)
pg = placement_group([{{"CPU": 2}}], name="trainers")
try:
    nbdist.get(pg.ready(), timeout=0.5)
except nbdist.exceptions.GetTimeoutError:
    print("timed out")
""")
    try:
        text = shared_kernel.ok("%nbdist why")
        assert "a placement group's ready(): the group is not placed yet" in text, text
        assert "trainers PENDING, bundles [{'CPU': 2" in text and "CPU 0/2" in text, text
    finally:
        gate.write_text("open")  # the later tests need the CPUs back
    shared_kernel.ok("nbdist.get(pg.ready(), timeout=60)\nremove_placement_group(pg)\n"
                     "assert nbdist.get(hogging, timeout=60)")
    text = shared_kernel.ok("""
@nbdist.remote
def leaf():
    return 1
nbdist.step_mode(True)
try:
    held = leaf.remote()
    try:
        nbdist.get(held, timeout=0.5)
    except nbdist.exceptions.GetTimeoutError:
        print("timed out")
    from nbdist.util.why import why
    print(why())
finally:
    nbdist.step_mode(False)
assert nbdist.get(held, timeout=60) == 1
""")
    assert "'leaf'" in text and "held by step-through mode" in text, text


def test_breakpoint_in_a_tune_trial(shared_kernel: KernelSession) -> None:
    shared_kernel.ok("""
import nbdist
from nbdist import tune
def trainable(config):
    score = config["x"] * 10
    breakpoint()
    tune.report({"score": score})
tuner = tune.Tuner(trainable, param_space={"x": tune.grid_search([4])})
""")
    reply, out, _ = run_with_answers(
        shared_kernel, "print('best', tuner.fit().get_best_result('score', 'max').metrics"
        "['score'])", ["p config['x'], score", "c"])
    assert reply["status"] == "ok", reply
    assert "paused at a breakpoint" in out, out
    assert "(4, 40)" in out and "best 40" in out
    nothing_paused(shared_kernel)


def test_init_debug_post_mortem_and_rays_variable(shared_kernel: KernelSession) -> None:
    shared_kernel.ok("import nbdist\n" + POST_MORTEM +
                     "nbdist.shutdown()\nnbdist.init(num_cpus=2, debug_post_mortem=True)")
    try:
        reply, out, _ = run_with_answers(
            shared_kernel, "nbdist.get(parse.remote(['x', 'wide']))", ["p row", "c"])
        assert reply["status"] == "error" and "ValueError" in reply["ename"]
        assert "paused at its exception ValueError: row too wide: 'wide'" in out
        assert "'wide'" in out
        nothing_paused(shared_kernel)
    finally:
        shared_kernel.ok("nbdist.shutdown()\nnbdist.init(num_cpus=2)")
    # Ray's variable in the workers' environment does the same.
    code = ("opts = {'env_vars': {'RAY_DEBUG_POST_MORTEM': '1'}}\n"
            "nbdist.get(parse.options(runtime_env=opts).remote(['y', 'wider']))")
    reply, out, _ = run_with_answers(shared_kernel, code, ["p row", "c"])
    assert reply["status"] == "error" and "ValueError" in reply["ename"]
    assert "paused at its exception ValueError: row too wide: 'wider'" in out
    nothing_paused(shared_kernel)
    # Without either, a failing task fails at once.
    content, _ = shared_kernel.execute("nbdist.get(parse.remote(['z', 'widest']))")
    assert content["status"] == "error" and "ValueError" in content["ename"]


KINDS = """
@nbdist.remote
class AsyncBox:
    async def twice(self, v):
        w = v * 2
        breakpoint()
        return w

@nbdist.remote(max_concurrency=2)
class Threaded:
    def triple(self, v):
        w = v * 3
        breakpoint()
        return w

@nbdist.remote
def outer(v):
    return nbdist.get(f.remote(v)) + 1
"""


@pytest.mark.parametrize(("call", "name", "local", "result"), [
    ("AsyncBox.remote().twice.remote(4)", "AsyncBox.twice", "p w", 8),
    ("Threaded.remote().triple.remote(4)", "Threaded.triple", "p w", 12),
    ("outer.remote(4)", "f", "p x", 51),  # f, nested in outer, pauses
])
def test_breakpoint_in_an_async_or_threaded_method_and_a_nested_task(
        shared_kernel: KernelSession, call: str, name: str, local: str, result: int) -> None:
    shared_kernel.ok(DEFS + KINDS)
    reply, out, _ = run_with_answers(shared_kernel, f"print('result', nbdist.get({call}))",
                                     [local, "c"])
    assert reply["status"] == "ok", reply
    assert f"task '{name}' paused at a breakpoint" in out, out
    assert "\n4\n" in out if local == "p x" else f"\n{result}\n" in out, out
    assert f"result {result}" in out, out
    nothing_paused(shared_kernel)
