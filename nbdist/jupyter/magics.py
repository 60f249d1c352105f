"""The ``%nbdist`` line magic and the ``%%remote`` cell magic.

Arguments are parsed with argparse (a parser whose errors raise IPython's UsageError listing the
valid flags) and typed by argparse itself; JSON values go through ``json.loads``. Nothing a
user types is ever evaluated as Python.

``%%remote [options]`` runs the cell in the user namespace, then replaces each function and
class the cell defined at top level (found with ``ast`` on the cell's source, and only if the
object now bound to that name was created by this run: ``__module__ == "__main__"`` and not the
object bound before) with ``nbdist.remote(**options)(obj)``. cloudpickle pickles ``__main__``
functions and classes by value, so closures, the globals they use and classes from earlier cells
travel with them. A local cluster starts first if none runs.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import HTML, display

import nbdist
from nbdist import events
from nbdist.jupyter import debug_magics


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (with the valid flags) instead of exiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}  # subcommand -> its parser

    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}\n\n{self.format_usage()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise _HelpShown()


class _HelpShown(Exception):
    """--help was printed; nothing else to do."""


def _json_dict(text: str) -> dict[str, float]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}): {text!r}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f'must be a JSON object like {{"name": 1}}: {text!r}')
    return value


def _add_resource_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--num-cpus", type=float, help="CPUs (a number)")
    p.add_argument("--num-gpus", type=float, help="GPUs (a number)")
    p.add_argument("--resources", type=_json_dict, help='custom resources, JSON: {"name": 1}')


def _nbdist_parser() -> _Parser:
    p = _Parser(prog="%nbdist", description="Manage the nbdist cluster of this kernel.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    start = sub.add_parser("start", help="start a local cluster, or attach to one (--address)")
    _add_resource_flags(start)
    start.add_argument("--address", metavar="HOST:PORT",
                       help="attach to the cluster started with `nbdist start --head` there "
                            "(needs a node on this machine; the token from `nbdist start` on "
                            "this machine or $NBDIST_TOKEN)")
    start.add_argument("--backend", choices=["nbdist", "ray"], default="nbdist",
                       help="nbdist's own engine (default) or Ray; with ray, --address is "
                            "auto, HOST:PORT or ray://HOST:PORT of a Ray cluster "
                            "(none: a local Ray)")
    sub.add_parser("status", help="nodes, workers, resources (used / total) as a table")
    up = sub.add_parser("up", help="start a cluster on other machines over SSH from a cluster "
                        "file (Ray's on-premise format) and attach this kernel to it")
    up.add_argument("file", metavar="CLUSTER.yaml")
    down = sub.add_parser("down", help="stop what %nbdist up started, on every host")
    down.add_argument("file", nargs="?", metavar="CLUSTER.yaml",
                      help="default: the cluster this kernel brought up")
    sub.add_parser("stop", help="stop the cluster and everything running on it")
    timeline = sub.add_parser("timeline", help="the task executions as an inline bokeh "
                              "timeline; with FILE, also as Chrome-trace JSON there")
    timeline.add_argument("file", nargs="?", metavar="FILE",
                          help="write the Chrome-trace JSON here (open it in chrome://tracing "
                               "or https://ui.perfetto.dev)")
    step = sub.add_parser("step", help="step-through mode: `on` holds each task before it "
                          "runs; no argument releases one, N releases N, `level` every held "
                          "task (the ready set), `off` or `run` releases all and stops holding")
    step.add_argument("what", nargs="?", default="1", metavar="on|off|N|level|run")
    sub.add_parser("run", help="release every held task and end step-through mode")
    show = sub.add_parser("show", help="the panel's live views inline, in this cell (any "
                          "frontend)")
    show.add_argument("--internal", action="store_true",
                      help="also draw the calls nbdist's libraries make for their runs")
    debug_magics.add_parsers(sub)
    p.commands = dict(sub.choices)
    return p


def _step(what: str) -> None:
    """``%nbdist step ...``: a thin layer over `nbdist.step_mode` and `nbdist.step`. Where the
    backend has no step mode (Ray) it says so and lets the notebook go on: the tasks then run
    as they are submitted, and the notebook's results stay the same."""
    try:
        _step_or_raise(what)
    except nbdist.exceptions.StepModeUnavailable as exc:
        print(f"{exc} Here the tasks run as they are submitted.")


def _step_or_raise(what: str) -> None:
    if what == "on":
        nbdist.step_mode(True)
        print("step-through mode on: each task waits before it runs; %nbdist step releases "
              "one, %nbdist step level the ready set, %nbdist run everything.")
        return
    if what in ("off", "run"):
        status = nbdist.step_mode(False)
        print(f"step-through mode off; released {_tasks_text(status.released)}.")
        return
    if what != "level" and not what.isdigit():
        raise UsageError(f"%nbdist step: expected on, off, run, level or a number, not {what!r}.")
    status = nbdist.step("level" if what == "level" else int(what))
    if not status.on:
        print("step-through mode is off: %nbdist step on turns it on.")
        return
    print(f"released {_tasks_text(status.released)}; {status.held} held.")


def _tasks_text(released: tuple[tuple[str, str], ...]) -> str:
    counts: dict[str, int] = {}
    for _, name in released:
        counts[name] = counts.get(name, 0) + 1
    what = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in counts.items())
    return f"{len(released)} task{'' if len(released) == 1 else 's'}" + (
        f" ({what})" if what else "")


def _remote_parser() -> _Parser:
    p = _Parser(prog="%%remote", description="Run the cell, then make each function and class "
                "it defined at top level remote (a task / an actor) under the same name.")
    _add_resource_flags(p)
    for flag in ("--max-retries", "--num-returns", "--max-restarts", "--max-concurrency"):
        p.add_argument(flag, type=int, help="an integer, as in @nbdist.remote(...)")
    return p


def _parse(parser: _Parser, line: str) -> argparse.Namespace | None:
    import shlex

    try:
        args, extra = parser.parse_known_args(shlex.split(line))
    except _HelpShown:
        return None
    except ValueError as exc:  # shlex: unbalanced quotes
        raise UsageError(f"{parser.prog}: {exc}\n\n{parser.format_usage()}") from exc
    if extra:
        # argparse hands a subcommand's unknown flags up to the top parser, whose usage
        # does not list them: name the flags of the subcommand that was given.
        owner = parser.commands.get(getattr(args, "command", None) or "", parser)
        owner.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


# Options that only make sense for one kind: a cell may define functions and classes together.
_TASK_ONLY = frozenset({"max_retries", "num_returns"})
_ACTOR_ONLY = frozenset({"max_restarts", "max_concurrency"})


def remote_options(args: argparse.Namespace, for_class: bool) -> dict[str, Any]:
    """The @remote options the flags give a class (``for_class``) or a function."""
    skip = _TASK_ONLY if for_class else _ACTOR_ONLY
    return {k: v for k, v in vars(args).items() if v is not None and k not in skip}


def defined_names(source: str) -> list[str]:
    """Names of the functions and classes a cell defines at top level, in order."""
    tree = ast.parse(source)
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def status_html() -> str:
    """The ``%nbdist status`` table: one row per node, resources as used / total, its workers
    (pid, busy with which task, or idle; from the event stream: `nbdist.events.workers`)."""
    if not nbdist.is_initialized():
        return "<p>No nbdist cluster is running. Start one with <code>%nbdist start</code>.</p>"
    total, free = nbdist.cluster_resources(), nbdist.available_resources()
    by_node: dict[str, list[events.WorkerState]] = {}
    for worker in events.workers():
        by_node.setdefault(worker.node_id, []).append(worker)
    rows = []
    for node in nbdist.nodes():
        res = ", ".join(
            f"{html.escape(k)}: {_amount(k, total.get(k, v) - free.get(k, 0))} used / "
            f"{_amount(k, v)}"
            for k, v in sorted(node["Resources"].items()) if not k.startswith("node:"))
        rows.append(f"<tr><td><code>{html.escape(str(node['NodeID'])[:12])}</code></td>"
                    f"<td>{'alive' if node['Alive'] else 'dead'}</td><td>{res}</td>"
                    f"<td>{_workers_html(by_node.get(str(node['NodeID']), []))}</td>"
                    f"<td>{node.get('ObjectStoreUsed', 0) / 2**20:.1f} MiB</td></tr>")
    return ("<table class='nbdist-status'><thead><tr><th>node</th><th>state</th>"
            "<th>resources (used / total)</th><th>workers</th><th>object store used</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{_metrics_html()}")


def _metrics_html() -> str:
    """The application metrics (`nbdist.util.metrics`), one row per metric and tags."""
    rows = []
    for m in nbdist.util.metrics.snapshot():
        tags = ", ".join(f"{k}={v}" for k, v in sorted(m["tags"].items()))
        value = (f"{m['value']:g}" if "value" in m else
                 f"count {m['count']}, mean {m['sum'] / max(1, m['count']):g}, buckets "
                 f"{m['buckets']} (≤ {m['boundaries']})")
        rows.append(f"<tr><td><code>{html.escape(m['name'])}</code></td><td>{m['kind']}</td>"
                    f"<td>{html.escape(tags)}</td><td>{html.escape(value)}</td></tr>")
    if not rows:
        return ""
    return ("<table class='nbdist-metrics'><thead><tr><th>metric</th><th>kind</th><th>tags</th>"
            f"<th>value</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _workers_html(workers: list[Any]) -> str:
    """A node's workers: ``pid N: busy — task (id)`` or ``pid N: idle``; the ones that
    ended are counted, not listed."""
    up = [w for w in workers if w.state == "up"]
    if not up:
        return "<i>none seen yet</i>"
    busy = sum(1 for w in up if w.busy)
    lines = [f"{busy} busy / {len(up) - busy} idle"]
    for w in up:
        what = (f"busy: <code>{html.escape(str(w.task_name))}</code> "
                f"<small>({html.escape(str(w.task_id))})</small>" if w.busy else "idle")
        lines.append(f"pid {w.pid}: {what}")
    down = len(workers) - len(up)
    if down:
        lines.append(f"<small>{down} exited</small>")
    return "<br>".join(lines)


def _timeline(file: str | None) -> None:
    """``%nbdist timeline [FILE]``: Chrome-trace JSON to FILE, and the bokeh timeline inline."""
    import os

    from nbdist.jupyter.plots import MAX_BARS, show_timeline

    path = os.path.expanduser(file) if file else None
    trace = nbdist.timeline(path)
    runs = events.executions(include_running=True)
    done = sum(1 for e in trace if e["ph"] == "X")
    if path is not None:
        print(f"wrote {done} task executions to {path} (open it in chrome://tracing or "
              "https://ui.perfetto.dev)")
    if not runs:
        print("no task executions recorded yet.")
        return
    show_timeline(runs[-MAX_BARS:], total=len(runs))


def _amount(resource: str, value: float) -> str:
    return f"{value / 2**30:.1f} GiB" if "memory" in resource else f"{value:g}"


def _start_ray(args: argparse.Namespace) -> None:
    """``%nbdist start --backend ray [--address ...]``."""
    if args.address and (args.num_cpus is not None or args.num_gpus is not None
                         or args.resources):
        raise UsageError("%nbdist start --backend ray --address: the Ray cluster owns the "
                         "resources; drop --num-cpus/--num-gpus/--resources.")
    info = nbdist.init(backend="ray", address=args.address, num_cpus=args.num_cpus,
                       num_gpus=args.num_gpus, resources=args.resources)
    where = (f"attached to the Ray cluster at {info.get('address', args.address)}"
             if args.address else "started a local Ray")
    print(f"nbdist on Ray: {where} (session {info.get('session_dir', '')}); "
          "%nbdist status shows it.")


@magics_class
class NbdistMagics(Magics):
    @line_magic
    def nbdist(self, line: str) -> None:
        """%nbdist start|status|stop|timeline|step|run|show [options] — manage this kernel's nbdist
        cluster; step and run drive step-through mode."""
        parser = _nbdist_parser()
        args = _parse(parser, line)
        if args is None:
            return
        if args.command == "start":
            if nbdist.is_initialized():
                raise UsageError("%nbdist start: a cluster is already running; "
                                 "run %nbdist stop first.")
            if args.backend == "ray":
                _start_ray(args)
                return
            if args.address:
                if args.num_cpus is not None or args.num_gpus is not None or args.resources:
                    raise UsageError("%nbdist start --address: the cluster's nodes own the "
                                     "resources; drop --num-cpus/--num-gpus/--resources.")
                info = nbdist.init(address=args.address)
                print(f"attached to the nbdist cluster at {info.get('address', args.address)} "
                      f"through node {info.get('node_id', '?')}; %nbdist status shows it.")
                return
            info = nbdist.init(num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                               resources=args.resources)
            # Reported from the request, not from a control call: the node may still be
            # joining the head right after init() returns.
            asked = {k: v for k, v in (("CPU", args.num_cpus), ("GPU", args.num_gpus))
                     if v is not None}
            asked.update(args.resources or {})
            print(f"nbdist cluster started{f' with {asked}' if asked else ''} "
                  f"(session {info.get('session_dir', '')}); %nbdist status shows it.")
        elif args.command == "status":
            display(HTML(status_html()))
        elif args.command in ("up", "down"):
            from nbdist.jupyter import cluster_magic

            getattr(cluster_magic, args.command)(args.file)
        elif args.command == "stop":
            nbdist.shutdown()
            print("nbdist cluster stopped.")
        elif args.command == "timeline":
            _timeline(args.file)
        elif args.command == "step":
            _step(args.what)
        elif args.command == "run":
            _step("run")
        elif args.command in ("debug", "stack", "why"):
            debug_magics.run(args)
        elif args.command == "show":
            from nbdist.jupyter.widget import show

            show(show_internal=args.internal)
        else:
            raise UsageError(f"%nbdist needs a command.\n\n{parser.format_usage()}")

    @cell_magic
    def remote(self, line: str, cell: str) -> None:
        """%%remote [options] — run the cell, then make its functions and classes remote."""
        args = _parse(_remote_parser(), line)
        if args is None:
            return
        try:
            names = defined_names(cell)
        except SyntaxError:
            names = []  # run_cell below reports the syntax error the usual way
        shell = self.shell
        assert shell is not None  # magics are only called from a shell
        ns = shell.user_ns
        before = {name: ns.get(name) for name in names}
        # IPython numbered this cell before running it; without the step back the inner run
        # would call the cell "In[N+1]" in tracebacks of the functions it defines.
        count = shell.execution_count
        shell.execution_count = count - 1
        try:
            result = shell.run_cell(cell, store_history=False)
        finally:
            shell.execution_count = count
        if not result.success:
            return
        if not nbdist.is_initialized():
            nbdist.init(ignore_reinit_error=True)
        for name in names:
            obj = ns.get(name)
            if obj is None or obj is before[name] or obj.__module__ != "__main__":
                continue
            options = remote_options(args, for_class=isinstance(obj, type))
            ns[name] = nbdist.remote(**options)(obj) if options else nbdist.remote(obj)
