"""Errors of ``nbdist.tune``.

    NbdistError
      TuneError          a search could not run as asked (bad arguments, a trainable that
                         cannot be pickled, a trial asking for more than the cluster has)
        TrialError       a trial failed: ``Result.error``; ``cause`` is the trainable's own
                         exception when it could be sent back, ``traceback`` its text
"""

from __future__ import annotations

from nbdist.exceptions import NbdistError


class TuneError(NbdistError):
    """A search could not run as asked."""


class TrialError(TuneError):
    """A trial's trainable raised (or its process died); the message holds the traceback."""

    def __init__(self, trial_id: str, traceback: str, cause: BaseException | None = None
                 ) -> None:
        super().__init__(f"Trial {trial_id} failed:\n{traceback}")
        self.trial_id = trial_id
        self.traceback = traceback
        self.cause = cause

    def __reduce__(self) -> tuple:
        return (TrialError, (self.trial_id, self.traceback, self.cause))
