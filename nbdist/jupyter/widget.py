"""``nbdist.show()`` and ``%nbdist show``: the panel's views inline, in any notebook frontend.

The view is an anywidget (`LiveWidget`): its front end is the panel's own code
(labextension/src/widget.ts around the board of board.ts, bundled to ``static/widget.js``
with the panel's stylesheet as ``static/widget.css``), so JupyterLab's cell output, Notebook 7,
VS Code and Colab draw the same graph, runs, waits, objects, workers and metrics as the
JupyterLab panel, with no code of their own.

Data: the widget is one more client of the comm bridge's hub (`bridge.hub()`, the same model
and deltas as the panel's comm): `Hub.attach` sends it a snapshot and then every delta, as the
widget's custom messages (the panel's schema, docs/comm-protocol.md). The front end asks for a
snapshot when a view of it renders (``request_snapshot``), and sends step commands (``step``);
those run on the kernel's shell thread, so unlike the panel's (control channel) they wait
while a cell is blocked. ``show_internal`` (a synced traitlet) is the graph's "library calls"
toggle. Closing the widget detaches it from the hub.

Static form: the widget's mime bundle also carries ``text/html``, `snapshot.snapshot_html` of
the state (an SVG graph and short lists, no script), which frontends without a widget manager
show (nbconvert, GitHub, a saved page). It is the state when the output was last written:
after each cell that changed the state, the output is written again (`IPython.display`'s
update of its display id), so a notebook run top to bottom keeps the last state.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import anywidget
import traitlets

from nbdist import events
from nbdist.jupyter import bridge, snapshot

__all__ = ["InlineView", "LiveWidget", "show"]

log = logging.getLogger(__name__)

STATIC = pathlib.Path(__file__).parent / "static"


class _HubClient:
    """The widget as the hub sees it: a comm to send messages on."""

    def __init__(self, widget: LiveWidget) -> None:
        self.widget = widget
        self.comm_id = widget.model_id

    def send(self, message: Any) -> None:
        self.widget.send(message)


class LiveWidget(anywidget.AnyWidget):
    """The live views of this kernel's cluster, inline (see the module docstring)."""

    _esm = STATIC / "widget.js"
    _css = STATIC / "widget.css"
    show_internal = traitlets.Bool(False).tag(sync=True)

    def __init__(self, show_internal: bool = False, **kwargs: Any) -> None:
        super().__init__(show_internal=show_internal, **kwargs)
        self._hub = bridge.hub()
        self._client = _HubClient(self)
        self._handle: Any = None
        self._written = ""  # the static form last written
        self.on_msg(self._on_msg)
        self._hub.attach(self._client)
        if self.comm is not None:  # closed from the frontend: no more deltas for it
            self.comm.on_close(lambda _msg: self._detach())

    def _detach(self) -> None:
        self._hub.close(self._client)
        _shown.discard(self)

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "request_snapshot":
            self._hub.resend(self._client)
        elif kind == "step":
            try:
                reply = bridge.step_command(str(content.get("command", "")))
            except Exception as exc:  # the view shows the message
                reply = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
            self.send({"type": "step_reply", **reply})
        elif kind == "debug":  # the details' stack of a running task, a wait row's why
            try:
                reply = bridge.debug_query(str(content.get("what", "")),
                                           str(content.get("target", "")))
            except Exception as exc:
                reply = {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
            self.send({"type": "debug_reply", **reply})

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            self._written = self.static_html()
            data["text/html"] = self._written
        return bundle

    def static_html(self) -> str:
        """The static form of the state now."""
        return snapshot.snapshot_html(self._hub.snapshot(), self.show_internal)

    def refresh_static(self) -> None:
        """Write the output again if the state changed since: its static form follows."""
        if self._handle is None or self.comm is None:
            return
        events.bus().flush()  # the cell's own records first
        if self.static_html() != self._written:
            self._handle.update(self)

    def close(self) -> None:
        self._detach()
        super().close()


_shown: set[LiveWidget] = set()


def _after_cell(_result: Any = None) -> None:
    for widget in list(_shown):
        try:
            widget.refresh_static()
        except Exception:  # a view that went away must not break the next cell
            log.debug("refreshing an inline view failed", exc_info=True)
            _shown.discard(widget)


class InlineView:
    """What `show` returns: the displayed widget (``.widget``); ``.close()`` removes it.
    Displayed again (the cell's last expression), it shows nothing in the cell that showed
    it, and a new view of the same widget in a later cell."""

    def __init__(self, widget: LiveWidget, shown_in: int | None) -> None:
        self.widget = widget
        self._shown_in = shown_in

    def close(self) -> None:
        self.widget.close()

    def _ipython_display_(self) -> None:
        from IPython import get_ipython
        from IPython.display import display

        if getattr(get_ipython(), "execution_count", None) != self._shown_in:
            display(self.widget)

    def __repr__(self) -> str:
        return "<nbdist inline view>"


def show(show_internal: bool = False) -> InlineView:
    """Display the live views in this cell (see the module docstring) and return them.
    ``show_internal``: draw the calls nbdist's libraries make for their runs too."""
    from IPython import get_ipython
    from IPython.display import display

    widget = LiveWidget(show_internal=show_internal)
    widget._handle = display(widget, display_id=True)
    ip = get_ipython()
    if ip is not None:
        if _after_cell not in ip.events.callbacks["post_run_cell"]:
            ip.events.register("post_run_cell", _after_cell)
        _shown.add(widget)
    return InlineView(widget, getattr(ip, "execution_count", None))
