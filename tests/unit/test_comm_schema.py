"""The comm schema is written twice, in Python (nbdist/jupyter/schema.py, which mypy checks the
kernel's messages against) and in TypeScript (labextension/src/protocol.ts, which tsc checks the
panel against): the two must name the same messages, the same fields, the same optional fields
and the same version. A real model's messages must carry exactly the fields declared."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from nbdist import events as ev
from nbdist.jupyter import schema
from nbdist.jupyter.model import Model

PROTOCOL_TS = Path(__file__).resolve().parents[2] / "labextension" / "src" / "protocol.ts"
_INTERFACE = re.compile(r"^(?:export )?interface (\w+)(?: extends (\w+))? \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s+(\w+)(\??):", re.M)


def _ts_interfaces() -> dict[str, tuple[set[str], set[str]]]:
    """interface name -> (required fields, optional fields), inherited fields included."""
    text = PROTOCOL_TS.read_text()
    found: dict[str, tuple[str | None, set[str], set[str]]] = {}
    for name, base, body in _INTERFACE.findall(text):
        fields = _FIELD.findall(body)
        found[name] = (base or None, {f for f, q in fields if not q}, {f for f, q in fields if q})
    out = {}
    for name, (base, required, optional) in found.items():
        while base:
            parent, req, opt = found[base]
            required, optional, base = required | req, optional | opt, parent
        out[name] = (required, optional)
    return out


def _py_fields(td: type) -> tuple[set[str], set[str]]:
    return set(td.__required_keys__), set(td.__optional_keys__)  # type: ignore[attr-defined]


def test_python_and_typescript_declare_the_same_messages_and_fields() -> None:
    ts = _ts_interfaces()
    py = {name: obj for name, obj in vars(schema).items()
          if isinstance(obj, type) and typing.is_typeddict(obj) and not name.startswith("_")}
    assert set(py) == set(ts), f"only in Python: {set(py) - set(ts)}, only in TS: {set(ts) - set(py)}"
    for name, td in py.items():
        assert _py_fields(td) == ts[name], f"{name}: Python {_py_fields(td)} != TS {ts[name]}"


def test_both_sides_speak_the_same_version_and_target() -> None:
    text = PROTOCOL_TS.read_text()
    assert f"SCHEMA_VERSION = {schema.SCHEMA_VERSION};" in text
    assert f"COMM_TARGET = '{schema.COMM_TARGET}';" in text


def _check(message: dict, td: type) -> None:
    required, optional = _py_fields(td)
    assert required <= set(message) <= required | optional, (
        f"{td.__name__}: missing {required - set(message)}, "
        f"undeclared {set(message) - required - optional}")


def test_a_real_models_messages_carry_exactly_the_declared_fields() -> None:
    model = Model()
    model.set_cluster(True)
    model.apply([
        ev.TaskSubmitted(1.0, "t1", "f", (), ("o1",), None, None, "cell-1"),
        ev.TaskStarted(1.1, "t1", "f", "node-1", 42),
        ev.TaskFinished(1.2, "t1", "f", 0.1, "node-1", 42, 1.1),
        ev.ObjectCreated(1.2, "o1", 10, "node-1", "driver", "t1", False),
        ev.WaitBegun(1.3, 7, "get", ("o1",), 1, 1, "cell-1"),
        ev.ActorCreated(1.4, "a1", "Counter", None),
    ])
    snap = model.snapshot()
    _check(dict(snap), schema.Snapshot)
    for key, td in (("tasks", schema.Task), ("objects", schema.StoredObject),
                    ("waits", schema.Wait), ("workers", schema.Worker),
                    ("nodes", schema.ClusterNode), ("actors", schema.Actor)):
        assert snap[key], f"the model made no {key}"  # type: ignore[literal-required]
        for record in snap[key].values():  # type: ignore[literal-required]
            _check(record, td)
    _check(dict(snap["totals"]), schema.Totals)
    delta = model.take_delta()
    assert delta is not None
    _check(dict(delta), schema.Delta)
