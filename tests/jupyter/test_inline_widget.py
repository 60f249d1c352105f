"""``nbdist.show()`` / ``%nbdist show`` in a real kernel: an anywidget that is one more client
of the comm bridge (the panel's snapshot and deltas as its custom messages), whose output also
carries a static snapshot (HTML with an SVG graph) written again after each cell that changed
the state; closed from the kernel or the frontend, it gets nothing more. The widget's front end
in real frontends: tests/browser/test_inline_view.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kernel_session import KernelSession

from nbdist.jupyter import schema

pytestmark = pytest.mark.timeout(180)

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _custom(k: KernelSession, comm_id: str) -> list[dict[str, Any]]:
    """The custom messages the kernel sent to the widget ``comm_id`` so far."""
    return [m["content"]["data"]["content"] for m in list(k.iopub)
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
            and m["content"]["data"].get("method") == "custom"]


def _names(messages: list[dict[str, Any]]) -> set[str]:
    return {t["name"] for m in messages for t in (m.get("tasks") or {}).values()}


def test_show_sends_the_panels_messages_and_a_static_snapshot_that_follows(
        shared_kernel: KernelSession) -> None:
    k = shared_kernel
    k.ok("@nbdist.remote\ndef square(x):\n    return x * x\n\n"
         "assert nbdist.get(square.remote(3)) == 9")
    content, msg_id = k.execute("view = nbdist.show()\nview")
    assert content["status"] == "ok"
    shown = [m["content"] for m in k.messages_for(msg_id) if m["msg_type"] == "display_data"]
    (bundle,) = shown  # the cell's last expression shows no second view
    model_id = bundle["data"][WIDGET_MIME]["model_id"]
    assert model_id == k.ok("print(view.widget.model_id)").strip()
    html = bundle["data"]["text/html"]
    assert "<svg" in html and "data-task-name='square'" in html and "<script" not in html
    display_id = bundle["transient"]["display_id"]

    # The snapshot the hub sent on attach: the panel's schema, the earlier task in it.
    first = k.wait_for(lambda: _custom(k, model_id), 30, "the widget's first message")
    assert first[0]["type"] == "snapshot" and first[0]["schema"] == schema.SCHEMA_VERSION
    assert "square" in _names(first)

    # A later cell's tasks reach it as deltas; after that cell its output is written again
    # with the new state in its static form.
    _, later = k.execute("@nbdist.remote\ndef cube(x):\n    return x ** 3\n\n"
                         "assert nbdist.get(cube.remote(2)) == 8")
    k.wait_for(lambda: "cube" in _names([m for m in _custom(k, model_id)
                                         if m["type"] == "delta"]), 30, "a delta with cube")
    updates = [m["content"] for m in k.messages_for(later)
               if m["msg_type"] == "update_display_data"]
    assert updates and updates[-1]["transient"]["display_id"] == display_id
    assert "data-task-name='cube'" in updates[-1]["data"]["text/html"]

    # The view asks for a snapshot when it renders; step commands are answered.
    client = k.client
    for data in ({"type": "request_snapshot"}, {"type": "step", "command": "bogus"}):
        client.shell_channel.send(client.session.msg("comm_msg", {
            "comm_id": model_id, "data": {"method": "custom", "content": data}}))
    k.wait_for(lambda: any(m["type"] == "step_reply" for m in _custom(k, model_id)), 30,
               "a step reply")
    reply = next(m for m in _custom(k, model_id) if m["type"] == "step_reply")
    assert reply["status"] == "error" and "bogus" in reply["message"]
    assert sum(m["type"] == "snapshot" for m in _custom(k, model_id)) >= 2

    # Closed: detached from the hub, the next tasks reach it no more.
    k.ok("view.close()")
    sent = len(_custom(k, model_id))
    k.ok("assert nbdist.get(square.remote(4)) == 16\nnbdist.events.bus().flush()")
    out = k.ok("import json\nfrom nbdist.jupyter import bridge\n"
               "print(json.dumps(view.widget._client in bridge.hub()._comms))")
    assert json.loads(out) is False
    assert len(_custom(k, model_id)) == sent


def test_a_view_closed_in_the_frontend_is_detached_and_the_magic_shows_one(
        shared_kernel: KernelSession) -> None:
    k = shared_kernel
    _, msg_id = k.execute("%nbdist show --internal")
    (bundle,) = [m["content"] for m in k.messages_for(msg_id) if m["msg_type"] == "display_data"]
    model_id = bundle["data"][WIDGET_MIME]["model_id"]
    out = k.ok("import json\nfrom nbdist.jupyter import bridge, widget\n"
               "(w,) = [w for w in widget._shown if w.model_id == " + repr(model_id) + "]\n"
               "print(json.dumps([w.show_internal, w._client in bridge.hub()._comms]))")
    assert json.loads(out) == [True, True]
    client = k.client
    client.shell_channel.send(client.session.msg("comm_close", {"comm_id": model_id,
                                                                "data": {}}))
    k.wait_for(lambda: json.loads(k.ok(
        "print(json.dumps(w._client in bridge.hub()._comms))")) is False, 30,
        "the widget detached after comm_close")
