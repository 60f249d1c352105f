"""Trials: the driver's record of one configuration being trained."""

from .trial import Trial

__all__ = ["Trial"]
