"""``tune.Callback``: hooks the runner calls in the driver as the search proceeds.

Every hook is called on the thread running ``fit()``, after the runner's own bookkeeping for
that event (the trial's status and ``last_result`` are already updated); an exception in a
hook ends the search, as in Ray Tune. ``iteration`` is the runner's step count.
"""

from __future__ import annotations

from typing import Any


class Callback:
    def setup(self, stop: Any = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: Any) -> None:
        pass

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        pass

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        pass

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        pass

    def on_trial_restore(self, iteration: int, trials: list[Any], trial: Any,
                         **info: Any) -> None:
        pass

    def on_trial_save(self, iteration: int, trials: list[Any], trial: Any,
                      **info: Any) -> None:
        pass

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        pass

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any,
                          **info: Any) -> None:
        pass

    def on_trial_recover(self, iteration: int, trials: list[Any], trial: Any,
                         **info: Any) -> None:
        pass

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any,
                       **info: Any) -> None:
        pass

    def on_checkpoint(self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any,
                      **info: Any) -> None:
        pass

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        pass


class CallbackList:
    """The callbacks of one run, called in order."""

    def __init__(self, callbacks: list[Callback]) -> None:
        self.callbacks = list(callbacks)

    def __getattr__(self, hook: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> None:
            for callback in self.callbacks:
                getattr(callback, hook)(*args, **kwargs)
        return call
