"""The teaching notebooks run top to bottom in a real kernel and show what their text claims."""

from __future__ import annotations

import re
import time

import pytest
from outputs import find

pytestmark = pytest.mark.timeout(120)


def test_01_tasks_tree_beats_chain_and_nested_prints_show(run_notebook, cell_text) -> None:
    start = time.monotonic()
    cells = cell_text(run_notebook("01-tasks.ipynb"))
    assert time.monotonic() - start < 30
    chain = find(cells, r"chain: sum 36 in ([\d.]+) s")
    tree = find(cells, r"tree:  sum 36 in ([\d.]+) s")
    assert float(tree[1]) < float(chain[1]) - 0.5
    assert find(cells, 'class="nbdist-ref"')
    find(cells, r"result: 42")
    find(cells, r"\(tree_sum pid=\d+\) sum of \[1, 2, 3, 4, 5, 6, 7, 8\] = 36")
    find(cells, r"caught a ZeroDivisionError from the task: division by zero")


def test_02_actors_keep_state_and_the_parameter_server_converges(run_notebook,
                                                                 cell_text) -> None:
    cells = cell_text(run_notebook("02-actors.ipynb"))
    find(cells, re.escape("[1, 2, 3, 4, 5, 110]"))
    find(cells, "after 4 tasks x 10 increments: 40")
    m = find(cells, r"120 updates from 3 workers: w = ([\d.-]+), c = ([\d.-]+)")
    assert abs(float(m[1]) - 3.0) < 0.1 and abs(float(m[2]) - 0.5) < 0.1
    assert len(re.findall(r"\(train_worker pid=\d+\) worker \d done", "".join(cells))) == 3


def test_03_objects_zero_copy_and_results_in_finish_order(run_notebook, cell_text) -> None:
    cells = cell_text(run_notebook("03-objects.ipynb"))
    find(cells, "equal: True [|] writeable: False")
    find(cells, "read-only: assignment destination is read-only")
    find(cells, r"49999995000000\.0 == 49999995000000\.0")
    find(cells, re.escape("finish order: [4, 16, 9, 1]"))
    find(cells, re.escape("all: [1, 4, 9, 16, 25, 36]"))
