"""Helpers of Ray Tune's ``tune.utils`` that programs written for Ray import.

``mock_trainable.MyTrainableClass`` is the toy trainable of Ray Tune's examples and tests.
"""

from __future__ import annotations

from typing import Any

__all__ = ["flatten_dict"]


def flatten_dict(dt: dict[str, Any], delimiter: str = "/",
                 prevent_delimiter: bool = False) -> dict[str, Any]:
    """Nested dicts as one level, keys joined by ``delimiter`` (``{"a": {"b": 1}}`` →
    ``{"a/b": 1}``); ``prevent_delimiter`` refuses keys that already hold it."""
    out: dict[str, Any] = {}
    for key, value in dt.items():
        if prevent_delimiter and delimiter in str(key):
            raise ValueError(f"found delimiter {delimiter!r} in key {key!r}")
        if isinstance(value, dict) and value:
            for inner, leaf in flatten_dict(value, delimiter, prevent_delimiter).items():
                out[f"{key}{delimiter}{inner}"] = leaf
        else:
            out[key] = value
    return out
