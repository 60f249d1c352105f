"""tqdm_ray's bar updates stay out of the output whoever sets the output handler afterwards
(a notebook loading nbdist, a test restoring its own), on both backends."""

from __future__ import annotations

import pytest
from polling import poll

import nbdist as ray
from nbdist import events
from nbdist.experimental import tqdm_ray

pytestmark = pytest.mark.timeout(180)


@ray.remote
def count_to(n):
    for _ in tqdm_ray.tqdm(range(n), desc="steps", flush_interval_s=0):
        pass
    print("done counting")
    return n


def test_bar_lines_skip_an_output_handler_set_after_the_import(backend: str) -> None:
    seen: list[events.Output] = []
    states: list[dict] = []
    events.set_output_handler(lambda lines: seen.extend(lines) or True)
    tqdm_ray.set_renderer(states.append)
    try:
        assert ray.get(count_to.remote(4)) == 4
        poll(lambda: any(e.line == "done counting" for e in seen))
        poll(lambda: any(s["closed"] for s in states))
    finally:
        events.set_output_handler(None)
        tqdm_ray.set_renderer(None)
    assert [e.line for e in seen] == ["done counting"]
    final = [s for s in states if s["closed"]][-1]
    assert (final["desc"], final["x"], final["task"]) == ("steps", 4, "count_to")
