"""Looking for text in the outputs of executed notebook cells."""

from __future__ import annotations

import re

import pytest


def find(cells: list[str], pattern: str) -> re.Match[str]:
    """The first match of ``pattern`` in any cell's output text; fails the test if none."""
    for text in cells:
        m = re.search(pattern, text)
        if m:
            return m
    pytest.fail(f"no cell output matches {pattern!r}:\n" + "\n---\n".join(cells))
