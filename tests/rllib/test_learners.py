"""``.learners(num_learners=N)``: PPO's update runs data-parallel in N learner actors (each a
shard of every minibatch, the gradients averaged), its calls marked as the library's; the
weights it reaches are the driver's update's (num_learners=0) from the same seed, for a single
module and for multi-agent policies; a checkpoint carries the learners' state; learners the
cluster cannot place are refused up front."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from nbdist import events
from nbdist.rllib.algorithms.algorithm import Algorithm
from nbdist.rllib.algorithms.ppo import PPOConfig
from nbdist.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole

SMALL = {"fcnet_hiddens": [16], "fcnet_activation": "tanh"}


def config(num_learners: int, multi_agent: bool = False) -> PPOConfig:
    env: Any = MultiAgentCartPole if multi_agent else "CartPole-v1"
    cfg = (PPOConfig().environment(env, env_config={"num_agents": 2} if multi_agent else {})
           .env_runners(num_env_runners=0).learners(num_learners=num_learners)
           .training(train_batch_size=200, minibatch_size=64, num_epochs=2, grad_clip=1.0)
           .rl_module(model_config=SMALL).debugging(seed=5))
    if multi_agent:
        cfg = cfg.multi_agent(policies={"p0", "p1"},
                              policy_mapping_fn=lambda aid, episode, **kw: f"p{aid}")
    return cfg


def train_twice(cfg: PPOConfig, checkpoint: str | None = None) -> dict[str, Any]:
    """After two iterations: the weights, the learner results and kl coefficients, the
    records published, the learner actors' pids; a checkpoint saved if asked."""
    algo = cfg.build_algo()
    try:
        out: dict[str, Any] = {"pids": algo.learner.foreach_learner("ping")}
        before = {id(item) for item in events.recent(raw=True)}
        algo.train()
        result = algo.train()
        out["records"] = [events.build(item) for item in events.recent(raw=True)
                          if id(item) not in before]
        ids = ["p0", "p1"] if algo.is_multi_agent else ["default_policy"]
        out["weights"] = {m: algo.get_module(m).get_state() for m in ids}
        out["learners"] = result["learners"]
        out["kl"] = {m: s["curr_kl_coeff"] for m, s in algo.learner.get_state().items()}
        if checkpoint:
            algo.save_to_path(checkpoint)
        return out
    finally:
        algo.stop()


def close(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(np.allclose(a[m][k], b[m][k], atol=1e-5) for m in a for k in a[m])


def test_learner_actors_update_as_the_driver_would(cluster: None) -> None:
    local, remote = train_twice(config(0)), train_twice(config(2))
    assert local["pids"] == []
    assert len(set(remote["pids"])) == 2 and os.getpid() not in remote["pids"]  # 2 processes
    assert close(local["weights"], remote["weights"]), \
        "2 learner actors reached other weights than the driver"
    for key in ("total_loss", "vf_loss", "mean_kl_loss", "curr_kl_coeff",
                "num_module_steps_trained"):
        assert np.isclose(local["learners"]["default_policy"][key],
                          remote["learners"]["default_policy"][key], rtol=1e-4, atol=1e-7), key
    steps = [e for e in remote["records"] if isinstance(e, events.TaskSubmitted)
             and e.name.endswith(".step")]
    assert steps and all(e.library_call is not None for e in steps)
    marks = {events.LibraryCall(*e.library_call) for e in steps}  # type: ignore[misc]
    assert {(m.library, m.member, m.role) for m in marks} == {
        ("rllib", "learner 1", "work"), ("rllib", "learner 2", "work")}


def test_learner_actors_train_multi_agent_policies_and_checkpoint(cluster: None,
                                                                  tmp_path: Any) -> None:
    path = str(tmp_path / "ckpt")
    local = train_twice(config(0, multi_agent=True))
    remote = train_twice(config(2, multi_agent=True), checkpoint=path)
    assert set(remote["learners"]) == {"p0", "p1", "__all_modules__"}
    assert close(local["weights"], remote["weights"])
    restored = Algorithm.from_checkpoint(path)
    try:
        assert not restored.learner.is_local and len(restored.learner.actors) == 2
        assert {m: s["curr_kl_coeff"] for m, s in restored.learner.get_state().items()} == \
            remote["kl"]
        assert restored.train()["training_iteration"] == 3
    finally:
        restored.stop()


def test_learners_the_cluster_cannot_place_say_so(cluster: None) -> None:
    with pytest.raises(RuntimeError, match="need 5 x 1 CPU"):
        config(5).build_algo()  # the module's cluster has 4 CPUs
