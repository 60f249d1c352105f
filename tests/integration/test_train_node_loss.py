"""A node lost under a training group is handled like a dead worker: the whole group restarts
from the latest checkpoint on the nodes that remain, while ``FailureConfig`` allows.

The cluster is two node daemons started with the ``nbdist`` command; the driver is a script
attached with ``init(address=...)``, as a user on a real cluster runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clusters import Cli, alive, start_head

pytestmark = [pytest.mark.timeout(240), pytest.mark.nbdist_only]

DRIVER = """
    import json, os, signal, tempfile
    from pathlib import Path

    import nbdist
    from nbdist import events, train
    from nbdist.train.torch import TorchTrainer, prepare_model

    nbdist.init(address={address!r})
    head = nbdist.get_runtime_context().get_node_id()
    updates = []
    events.subscribe(updates.extend, kinds=["run_update"])

    def loop(config):
        import torch

        ctx = train.get_context()
        node = nbdist.get_runtime_context().get_node_id()
        Path(config["dir"], f"worker-{{ctx.get_world_rank()}}-{{os.getpid()}}").write_text(node)
        model = prepare_model(torch.nn.Linear(2, 1))
        start = 0
        checkpoint = train.get_checkpoint()
        if checkpoint is not None:
            with checkpoint.as_directory() as folder:
                start = json.loads(Path(folder, "state.json").read_text())["epoch"] + 1
        for epoch in range(start, config["epochs"]):
            if epoch == 2 and node != config["head"] and checkpoint is None:
                # This worker's machine goes away under the group: its node daemon and its
                # processes at once (the node's own end would kill this one a moment later).
                os.kill(config["node_pid"], signal.SIGKILL)
                os.kill(os.getpid(), signal.SIGKILL)
            model(torch.ones(1, 2)).sum().backward()  # an allreduce: each rank waits for all
            saved = None
            if ctx.get_world_rank() == 0:
                folder = tempfile.mkdtemp()
                Path(folder, "state.json").write_text(json.dumps({{"epoch": epoch}}))
                saved = train.Checkpoint.from_directory(folder)
            train.report({{"epoch": epoch, "resumed_at": start, "node": node}}, checkpoint=saved)

    trainer = TorchTrainer(
        loop,
        train_loop_config={{"epochs": 4, "dir": {marks!r}, "head": head,
                            "node_pid": {node_pid}}},
        scaling_config=train.ScalingConfig(num_workers=2, placement_strategy="SPREAD"),
        run_config=train.RunConfig(name="node-loss", storage_path={storage!r},
                                   failure_config=train.FailureConfig(max_failures=1)))
    result = trainer.fit()
    print("METRICS", json.dumps(result.metrics))
    print("EPOCHS", json.dumps(list(result.metrics_dataframe["epoch"])))
    print("RESUMED", json.dumps(list(result.metrics_dataframe["resumed_at"])))
    notes = [u.note for u in updates if u.status == "RESTARTING"]
    print("RESTARTS", json.dumps(notes))
    print("HEAD", head)
    nbdist.shutdown()
"""


def _line(out: str, tag: str) -> str:
    return next(ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith(tag + " "))


def test_a_lost_node_restarts_the_group_from_its_checkpoint_on_the_nodes_left(
        cli: Cli, tmp_path: Path) -> None:
    address = start_head(cli, "--num-cpus", "2")
    cli.run("start", "--address", address, "--num-cpus", "1")
    other = cli.status()["nodes"][1]  # the joined node
    marks = tmp_path / "workers"
    marks.mkdir()
    driver = cli.python(DRIVER.format(address=address, marks=str(marks), node_pid=other["pid"],
                                      storage=str(tmp_path / "runs")), timeout=200)
    out = driver.stdout
    assert driver.returncode == 0, driver.stderr[-4000:] + out
    head = _line(out, "HEAD")
    assert json.loads(_line(out, "METRICS"))["epoch"] == 3
    # Epochs 0 and 1 ran on both nodes; the group then restarted from epoch 1's checkpoint.
    assert json.loads(_line(out, "EPOCHS")) == [0, 1, 2, 3]
    assert json.loads(_line(out, "RESUMED")) == [0, 0, 2, 2]
    restarts = json.loads(_line(out, "RESTARTS"))
    assert restarts and restarts[0].startswith("restart 1 after worker 1 died"), restarts
    # The first group spanned both nodes; the second ran where nodes were left: the head.
    workers = sorted(marks.iterdir(), key=lambda p: p.stat().st_mtime)
    nodes = [p.read_text() for p in workers]
    assert len(workers) == 4, [p.name for p in workers]
    assert set(nodes[:2]) == {head, other["node_id"]}, nodes
    assert nodes[2:] == [head, head], nodes
    assert not alive(other["pid"])
    lost = [int(p.name.split("-")[2]) for p in workers if p.read_text() != head]
    assert lost and not any(alive(pid) for pid in lost)
    assert cli.status()["nodes"][1]["alive"] is False
