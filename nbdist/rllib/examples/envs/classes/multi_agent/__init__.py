"""RLlib's example multi-agent envs (``ray.rllib.examples.envs.classes.multi_agent``).

``MultiAgentCartPole(config)``: ``config["num_agents"]`` independent CartPole-v1 games, agent
``i`` plays game ``i`` (ids 0 .. n-1); an agent whose pole fell leaves, and the episode ends
when every agent's game has (its return, summed over agents, is at most 500 x n).
``RockPaperScissors`` (in ``.rock_paper_scissors``): two players, simultaneous moves, ten per
episode. ``TicTacToe`` (in ``.tic_tac_toe``): two players taking turns.
"""

from nbdist.rllib.env.multi_agent_env import make_multi_agent
from nbdist.rllib.examples.envs.classes.multi_agent.rock_paper_scissors import RockPaperScissors
from nbdist.rllib.examples.envs.classes.multi_agent.tic_tac_toe import TicTacToe


class MultiAgentCartPole(make_multi_agent("CartPole-v1")):  # type: ignore[misc]
    """``num_agents`` CartPole-v1 games, one per agent (see the module docstring)."""


__all__ = ["MultiAgentCartPole", "RockPaperScissors", "TicTacToe"]
