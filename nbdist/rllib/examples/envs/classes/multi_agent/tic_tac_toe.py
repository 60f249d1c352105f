"""Tic-tac-toe for two players taking turns (RLlib's example ``TicTacToe``).

The board is nine fields, observed as a float vector: 0 empty, 1 player1's, -1 player2's. The
player to move (chosen at random at reset) is the only agent in the obs dict; its action is a
field (``Discrete(9)``). A move onto an occupied field costs its player 5 and changes nothing;
completing a row, column or diagonal gives the mover +1 and the other -1 and ends the
episode, as does a full board. There is no move limit: a greedy policy that keeps choosing an
occupied field never ends its episode (evaluate with ``evaluation_config={"explore": True}``
until it has learnt better).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from nbdist.rllib.env.multi_agent_env import MultiAgentEnv

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8),
         (2, 4, 6)]


class TicTacToe(MultiAgentEnv):
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.agents = self.possible_agents = ["player1", "player2"]
        self.observation_spaces = {a: gym.spaces.Box(-1.0, 1.0, (9,), np.float32)
                                   for a in self.agents}
        self.action_spaces = {a: gym.spaces.Discrete(9) for a in self.agents}
        self.board = [0] * 9
        self.current_player = "player1"
        self._rng = np.random.default_rng()

    def _obs(self) -> dict[str, np.ndarray]:
        return {self.current_player: np.array(self.board, np.float32)}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.board = [0] * 9
        self.current_player = str(self._rng.choice(self.agents))
        return self._obs(), {}

    def step(self, action_dict: dict[str, int]) -> Any:
        player = self.current_player
        opponent = "player2" if player == "player1" else "player1"
        action = int(action_dict[player])
        rewards = {player: 0.0}
        terminateds = {"__all__": False}
        if self.board[action] != 0:
            rewards[player] -= 5.0  # an occupied field: a wasted move
        else:
            mark = 1 if player == "player1" else -1
            self.board[action] = mark
            if any(all(self.board[i] == mark for i in line) for line in LINES):
                rewards[player] += 1.0
                rewards[opponent] = -1.0
                terminateds["__all__"] = True
            elif 0 not in self.board:
                terminateds["__all__"] = True
        self.current_player = opponent
        return self._obs(), rewards, terminateds, {"__all__": False}, {}
