"""A real IPython kernel driven through jupyter_client (fixtures in conftest.py).

``KernelSession.execute(code)`` sends one execute_request and returns its reply together with
every iopub message whose parent is that request. Messages are read by a single collector
thread into a list, so a message that arrives late (after its cell finished, while another cell
runs) is still found under the right parent: ``messages_for(msg_id)`` and
``wait_for_output(msg_id, text)`` poll that list, never sleep for fixed times.

The kernel is the venv's own ``python3`` kernelspec, so it imports nbdist from this checkout.
Kernels are always shut down in the fixture's finalizer.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest
from jupyter_client import KernelManager
from polling import importable_env, poll, until

START_TIMEOUT = 60


class KernelSession:
    def __init__(self, km: KernelManager) -> None:
        self.km = km
        self.client = km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=START_TIMEOUT)
        self.iopub: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.client.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            with self._lock:
                self.iopub.append(msg)

    def wait_for_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until the kernel answers on shell and its iopub messages reach the collector
        (e.g. after a restart). jupyter_client's own ``wait_for_ready`` reads iopub itself,
        which would race the collector thread for the socket's frames."""
        poll(self._answers_on_shell_and_iopub, timeout=timeout, interval=0,
             what="the kernel to answer kernel_info on shell and iopub")

    def _answers_on_shell_and_iopub(self) -> bool:
        # Requests sent while the kernel was still starting are answered late: their replies
        # are read and dropped here, or each new request would only meet the previous reply.
        msg_id = self.client.kernel_info()
        if not until(lambda: self._shell_reply(msg_id), timeout=1.0, interval=0):
            return False
        # False if iopub was not connected yet when the kernel answered: then ask again.
        return bool(until(lambda: self._idle(msg_id), timeout=1.0))

    def _shell_reply(self, msg_id: str) -> dict[str, Any] | None:
        """Read one shell message: the reply to ``msg_id``, or None (any other is dropped)."""
        try:
            msg = self.client.get_shell_msg(timeout=0.1)
        except queue.Empty:
            return None
        return msg if msg["parent_header"].get("msg_id") == msg_id else None

    def _idle(self, msg_id: str) -> bool:
        return any(m["msg_type"] == "status" and m["content"]["execution_state"] == "idle"
                   for m in self.messages_for(msg_id))

    def submit(self, code: str) -> str:
        """Send an execute_request without waiting; returns its msg_id."""
        return self.client.execute(code)

    def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        return poll(lambda: self._shell_reply(msg_id), timeout=timeout, interval=0,
                    what=f"the execute_reply to {msg_id}")

    def execute(self, code: str, timeout: float = 60) -> tuple[dict[str, Any], str]:
        """Run ``code``; returns (execute_reply content, msg_id) once the kernel is idle."""
        msg_id = self.submit(code)
        reply = self.reply(msg_id, timeout)
        self.wait_idle(msg_id, timeout)
        return reply["content"], msg_id

    def ok(self, code: str, timeout: float = 60) -> str:
        """Run ``code`` and fail the test if it raised; returns the cell's stdout text."""
        content, msg_id = self.execute(code, timeout)
        if content["status"] != "ok":
            pytest.fail(f"cell failed: {content.get('ename')}: {content.get('evalue')}\n"
                        + "\n".join(content.get("traceback", [])))
        return self.text_for(msg_id)

    def messages_for(self, msg_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [m for m in self.iopub if m["parent_header"].get("msg_id") == msg_id]

    def text_for(self, msg_id: str, stream: str = "stdout") -> str:
        return "".join(m["content"]["text"] for m in self.messages_for(msg_id)
                       if m["msg_type"] == "stream" and m["content"]["name"] == stream)

    def wait_idle(self, msg_id: str, timeout: float) -> None:
        self.wait_for(lambda: self._idle(msg_id), timeout, f"kernel idle after {msg_id}")

    def wait_for(self, predicate: Any, timeout: float, what: str) -> Any:
        return poll(predicate, timeout=timeout, what=what)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.stop_channels()


def start_kernel() -> KernelSession:
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=importable_env())  # cells and their remote functions use polling.py
    try:
        return KernelSession(km)
    except BaseException:
        km.shutdown_kernel(now=True)
        raise


def stop_kernel(session: KernelSession) -> None:
    try:
        session.close()
    finally:
        session.km.shutdown_kernel(now=True)
