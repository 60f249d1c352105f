"""12-data runs top to bottom in a real kernel and shows what its text claims: a Parquet folder
written and read back, fused task maps, an actor pool of two, a groupby equal to pandas', a
shuffle that keeps every row, the data split across workers three ways (refs, split, a
TorchTrainer fed by streaming shards) and the live view of the actor pool's run in its cell."""

from __future__ import annotations

import re

import pytest
from outputs import find

pytestmark = pytest.mark.timeout(180)


def test_12_data_read_transform_group_shuffle_and_three_splits(run_notebook, cell_text) -> None:
    nb = run_notebook("12-data.ipynb")
    assert nb.cells[0].source.startswith("# 12 · Data")
    cells = cell_text(nb)
    find(cells, re.escape("8 Parquet files, 40,000 rows, columns ['id', 'x1', 'x2', 'group', 'y']"))
    find(cells, re.escape("Dataset(ReadParquet -> MapBatches(add_features) -> Filter)"))
    kept = find(cells, r"kept ([\d,]+) of 40,000 rows; pandas keeps ([\d,]+)")
    assert kept[1] == kept[2]
    # Read, map and filter fused into one task per file: one operator line in stats().
    find(cells, r"Operator ReadParquet->MapBatches\(add_features\)->Filter: 8 blocks, "
                rf"{kept[1]} rows")
    scored = find(cells, r"scored 40,000 rows in (\d+) actor processes; largest error ([\d.]+)")
    assert int(scored[1]) == 2 and float(scored[2]) < 1.0
    find(cells, "same as pandas: True")
    first = find(cells, r"first ids after the shuffle: \[([\d, ]+)\]")[1]
    assert [int(i) for i in first.split(", ")] != list(range(5))
    find(cells, "still every row once: True")
    find(cells, re.escape("8 blocks; the two tasks got 20,000 and 20,000 rows; sums add up: True"))
    find(cells, r"worker 0: 20,000 rows, mean y 1\.\d+\nworker 1: 20,000 rows, mean y 1\.\d+")
    find(cells, re.escape("rank 0 read 20,000 rows in 40 steps per epoch"))
    fit = find(cells, r"loss ([\d.]+), w = \[([\d.-]+), ([\d.-]+)\], b = ([\d.-]+)")
    assert float(fit[1]) < 0.05
    assert [round(float(v), 1) for v in fit.groups()[1:]] == [3.0, -2.0, 1.0]
    assert "not writable" not in "".join(cells)  # zero-copy tensors without torch's warning
    cell = next(c for c in nb.cells if c.cell_type == "code" and "class Scorer" in c.source)
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    find([text], r"ReadParquet->MapBatches\(Scorer\): 8 blocks 40,000 rows")
    # The pool's run lasts over VIEW_AFTER_S (its actors load for two seconds): its cell shows
    # the live view of its operators, in a notebook run by nbclient as in JupyterLab.
    lanes = [_lanes(nb, o) for o in cell.outputs if o.output_type == "display_data"
             and o.data.get("text/plain", "").startswith("VBox")]
    scorer = [t for t in lanes if "data-lane='ReadParquet-&gt;MapBatches(Scorer)'" in t]
    assert len(scorer) == 1, lanes
    blocks = int(re.search(r"MapBatches\(Scorer\)' data-blocks='(\d+)'", scorer[0])[1])
    assert 1 <= blocks <= 8


def _lanes(nb, output) -> str:
    """The operator lanes (the HTML of its table) of a run view displayed as ``output``, from
    the widget state nbclient saved with the notebook."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    view = state[output.data["application/vnd.jupyter.widget-view+json"]["model_id"]]
    children = [state[c.removeprefix("IPY_MODEL_")] for c in view["state"]["children"]]
    return "".join(c["state"].get("value", "") for c in children
                   if isinstance(c["state"].get("value"), str))
