"""``%nbdist status`` shows the application metrics (`nbdist.util.metrics`) recorded in
tasks, aggregated over the cluster, in a real kernel."""

from __future__ import annotations

import pytest
from kernel_session import KernelSession

pytestmark = pytest.mark.timeout(120)

RECORD = """%%remote
from nbdist.util.metrics import Counter

def handle(i):
    Counter("requests_handled", "requests", tag_keys=("route",)).inc(tags={"route": "/a"})
    return i
"""


def test_status_lists_metrics_recorded_in_tasks(kernel: KernelSession) -> None:
    k = kernel
    k.ok(RECORD)
    k.ok("nbdist.get([handle.remote(i) for i in range(4)])")

    def shown() -> str:
        _, cell = k.execute("%nbdist status")
        html = "".join(m["content"]["data"].get("text/html", "") for m in k.messages_for(cell)
                       if m["msg_type"] == "display_data")
        return html if "<code>requests_handled</code>" in html and ">4<" in html else ""

    table = k.wait_for(shown, 60, "the counter at 4 in %nbdist status")
    assert "route=/a" in table and "counter" in table
