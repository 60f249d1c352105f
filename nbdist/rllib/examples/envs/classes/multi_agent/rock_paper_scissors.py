"""Rock, paper, scissors for two players (RLlib's example ``RockPaperScissors``).

Agents ``"player1"`` and ``"player2"`` move at once each step; each observes the other's last
move (0 before the first). A win is +1, a loss -1, a draw 0 for both; the episode terminates
after ten moves. With ``config={"sheldon_cooper_mode": True}`` lizard and Spock join (five
moves).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from nbdist.rllib.env.multi_agent_env import MultiAgentEnv


class RockPaperScissors(MultiAgentEnv):
    ROCK = 0
    PAPER = 1
    SCISSORS = 2
    LIZARD = 3
    SPOCK = 4

    # What each pair of moves (player1's, player2's) is worth to (player1, player2).
    WIN_MATRIX = {
        (ROCK, ROCK): (0, 0), (ROCK, PAPER): (-1, 1), (ROCK, SCISSORS): (1, -1),
        (PAPER, ROCK): (1, -1), (PAPER, PAPER): (0, 0), (PAPER, SCISSORS): (-1, 1),
        (SCISSORS, ROCK): (-1, 1), (SCISSORS, PAPER): (1, -1), (SCISSORS, SCISSORS): (0, 0),
        (ROCK, LIZARD): (1, -1), (ROCK, SPOCK): (-1, 1), (PAPER, LIZARD): (-1, 1),
        (PAPER, SPOCK): (1, -1), (SCISSORS, LIZARD): (1, -1), (SCISSORS, SPOCK): (-1, 1),
        (LIZARD, ROCK): (-1, 1), (LIZARD, PAPER): (1, -1), (LIZARD, SCISSORS): (-1, 1),
        (LIZARD, LIZARD): (0, 0), (LIZARD, SPOCK): (1, -1), (SPOCK, ROCK): (1, -1),
        (SPOCK, PAPER): (-1, 1), (SPOCK, SCISSORS): (1, -1), (SPOCK, LIZARD): (-1, 1),
        (SPOCK, SPOCK): (0, 0),
    }

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.sheldon_cooper_mode = bool((config or {}).get("sheldon_cooper_mode", False))
        moves = 5 if self.sheldon_cooper_mode else 3
        self.agents = self.possible_agents = ["player1", "player2"]
        # The observation is the other player's last move: the spaces are the same.
        self.observation_spaces = {a: gym.spaces.Discrete(moves) for a in self.agents}
        self.action_spaces = {a: gym.spaces.Discrete(moves) for a in self.agents}
        self.num_moves = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, int], dict[str, Any]]:
        self.num_moves = 0
        return {"player1": 0, "player2": 0}, {}

    def step(self, action_dict: dict[str, int]) -> Any:
        self.num_moves += 1
        move1, move2 = int(action_dict["player1"]), int(action_dict["player2"])
        observations = {"player1": move2, "player2": move1}
        r1, r2 = self.WIN_MATRIX[move1, move2]
        rewards = {"player1": r1, "player2": r2}
        terminateds = {"__all__": self.num_moves >= 10}
        return observations, rewards, terminateds, {}, {}
