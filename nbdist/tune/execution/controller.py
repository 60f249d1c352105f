"""The loop that runs a search: trials in, decisions out, actors in between.

One controller per ``fit()``, owned by the thread that called it (the kernel's main thread in a
notebook). State, all in this object:

    trials        every Trial made so far, in order of creation
    running       Trial → _Run: its actor, its ``run`` call, the one ``poll`` call in flight
                  (none in its first ``FIRST_POLL_S``), the decision sent
    source        where configs come from (``nbdist.tune.search.make_trial_source``)
    scheduler     decides CONTINUE / PAUSE / STOP per result and which trial runs next

A step waits for any running trial's poll reply (a batch of reports, or the end of the trial) or
the end of its ``run`` (which carries the reports no poll took), feeds each report to the
stoppers, the searcher and the scheduler, and sends the next poll with the decision; the trial's
actor carries it out at the trainable's next report. Reports after a STOP or PAUSE are dropped,
so a trial's results end where its decision was made. A callback that sets
``should_checkpoint`` in a result has the next poll carry ``SAVE`` as well.

A trial whose ``run`` ended is finished from that reply even while a poll is still unanswered
(the reply counts the polls that took reports, so none is lost), and the replies still owed
once a trial has ended are waited for at most ``REPLY_DEADLINE_S``. A running trial is never
failed for silence: its trainable may hold the GIL in a long native call.

Trials are started only when their actor fits the cluster now (``ActorManager``). A failure
(the trainable raised, or its process died) restarts the trial from its last checkpoint up to
``FailureConfig.max_failures`` times, then marks it ERROR; the search goes on. On
KeyboardInterrupt every trial actor is killed at once and the running trials are left PAUSED,
so ``fit()`` returns what was done and ``Tuner.restore`` can resume them.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

import nbdist
from nbdist.tune.callback import CallbackList
from nbdist.tune.checkpoint import Checkpoint
from nbdist.tune.error import TuneError
from nbdist.tune.execution import publish
from nbdist.tune.execution.actors import ActorManager, ActorSlot, actor_key
from nbdist.tune.experiment.trial import Trial
from nbdist.tune.result import SHOULD_CHECKPOINT
from nbdist.tune.stopper import DictStopper
from nbdist.tune.trainable.resources import resources_of
from nbdist.tune.trainable.session import SAVE

logger = logging.getLogger(__name__)
POLL_TIMEOUT_S = 2.0  # how long an actor's poll waits for a report before answering empty
# A trial is first polled this long after it starts: one that ends sooner (a short trial) is
# read from its ``run`` reply alone, one message instead of two.
FIRST_POLL_S = 0.02
WAIT_S = 0.5  # the longest the loop sleeps without news (time budget, interrupts)
# A trial told to stop or pause stops at its next report; one that does not report again
# within this long (stuck in a long step) has its actor killed instead.
STOP_GRACE_S = 10.0
# Once a trial has ended (its poll said so, or its ``run`` returned), the reply still owed by
# its idle actor comes at once; one missing this long means the actor cannot answer.
REPLY_DEADLINE_S = 60.0
CONTINUE, PAUSE, STOP = "CONTINUE", "PAUSE", "STOP"


@dataclass
class Settings:
    """What the controller needs of TuneConfig and RunConfig, resolved."""
    reuse_actors: bool = True
    max_concurrent_trials: int | None = None
    time_budget_s: float | None = None
    checkpoint_config: Any = None
    failure_config: Any = None
    trial_name_creator: Any = None
    trial_dirname_creator: Any = None
    resources: Any = None  # the default request of a trial (the seed's 'resources')


@dataclass(eq=False)
class _Run:
    slot: ActorSlot
    run_ref: Any
    started: float
    key: str  # names this start of the trial in the actor's polls
    trial_id: str = ""
    poll_ref: Any = None
    answered: int = 0  # poll replies taken, compared with the polls ``run`` says took reports
    decision: str = ""
    decided_at: float = 0.0
    restart: bool = False  # PBT: start again right away from trial.restore_from
    save: bool = False  # a callback asked for a checkpoint (``should_checkpoint``)


class TuneController:
    def __init__(self, *, trainable: Any, trainable_name: str, source: Any, scheduler: Any,
                 stopper: Any, callbacks: CallbackList, storage: Any, settings: Any,
                 trials: list[Trial] | None = None) -> None:
        self.trainable_name = trainable_name
        self.source = source
        self.scheduler = scheduler
        self.stopper = stopper
        self.callbacks = callbacks
        self.storage = storage
        self.settings = settings
        self.run_name = publish.unique_run_name(storage.name)
        self.trials: list[Trial] = list(trials or [])
        self.running: dict[Trial, _Run] = {}
        self.actors = ActorManager(trainable, settings.reuse_actors)
        self.trainable = trainable
        self.run_id = uuid.uuid4().hex[:5]
        self.counter = len(self.trials)
        self.starts = 0  # trial starts so far (a trial starts again after a pause or failure)
        self.iteration = 0
        self.ending = ""  # why no more trials start: "time budget", "stopper", "fail fast"
        self.interrupted = False
        self.started_at = time.monotonic()
        for trial in self.trials:
            self.scheduler.on_trial_add(self, trial)

    # ------------------------------------------------------------ what schedulers see
    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished]

    def stop_trial(self, trial: Trial) -> None:
        """End a trial other than the one reporting (HyperBand ending a paused trial): a
        running one at its next report, a waiting one now."""
        why = f"stopped by {type(self.scheduler).__name__}"
        run = self.running.get(trial)
        if run is not None:  # running, or winding down after a PAUSE
            if run.decision != STOP:
                run.decision, run.restart, trial.stopping = STOP, False, why
                run.decided_at = run.decided_at or time.monotonic()
                trial.status = Trial.TERMINATED
                publish.trial(self, trial, note=why)
        elif not trial.is_finished:
            trial.stopping = why
            self.complete(trial, note=why)

    # ------------------------------------------------------------ the loop
    def run(self) -> list[Trial]:
        # Every call the search makes is Tune's own (actors, checks), shown folded into the
        # search by the views; a trial's ``run`` is marked as that trial's work.
        with nbdist.events.library_call("tune", self.run_name):
            try:
                while self.step():
                    pass
            except KeyboardInterrupt:
                self.interrupt()
            finally:
                self.finish()
        return self.trials

    def step(self) -> bool:
        """One round: start what can start, take what trials reported. False: all done."""
        self.iteration += 1
        self.callbacks.on_step_begin(self.iteration, self.trials)
        self.check_budget()
        if not self.ending:
            self.start_trials()
        if not self.running:
            return self.idle_step()
        self.take_reports()
        self.callbacks.on_step_end(self.iteration, self.trials)
        self.save_state()
        return True

    def idle_step(self) -> bool:
        """Nothing runs: the search is over unless the source will give more later."""
        if self.ending:
            return False
        waiting = [t.trial_id for t in self.trials if t.status in (Trial.PENDING, Trial.PAUSED)]
        if waiting:
            logger.warning("ending the search with trials %s waiting: nothing runs and %s chose "
                           "none of them to run", waiting, type(self.scheduler).__name__)
            return False
        if self.source.finished():
            return False
        time.sleep(0.01)  # a searcher that has nothing yet (e.g. an asynchronous one)
        return True

    def check_budget(self) -> None:
        budget = self.settings.time_budget_s
        if budget is not None and time.monotonic() - self.started_at >= budget and not \
                self.ending:
            self.end_all("time budget")
        if not self.ending and self.stopper.stop_all():
            self.end_all("stopper")

    def end_all(self, why: str) -> None:
        """Stop starting trials; stop the running ones now (they keep their results)."""
        self.ending = why
        for trial in list(self.running):
            self.kill_run(trial)
            self.complete(trial, note=f"stopped: {why}")

    # ------------------------------------------------------------ starting trials
    def start_trials(self) -> None:
        limit = self.settings.max_concurrent_trials
        while limit is None or len(self.running) < limit:
            trial = self.scheduler.choose_trial_to_run(self)
            if trial is None:
                if self.new_trial() is None:
                    return
                continue
            if not self.start(trial):
                return

    def new_trial(self) -> Trial | None:
        if self.source.finished():
            return None
        trial_id = f"{self.run_id}_{self.counter:05d}"
        made = self.source.next_config(trial_id)
        if made is None:
            return None
        config, tag = made
        self.counter += 1
        resources, bundles, strategy = resources_of(self.trainable, config,
                                                    self.settings.resources)
        trial = Trial(trial_id=trial_id, config=config, trainable_name=self.trainable_name,
                      experiment_tag=tag, evaluated_params=_flatten(config),
                      resources=resources, bundles=bundles, placement_strategy=strategy)
        if self.settings.trial_name_creator is not None:  # named once, as Ray: str(trial)
            trial.custom_trial_name = str(self.settings.trial_name_creator(trial))
        self.storage.trial_dir(trial, self.dirname(trial))
        self.storage.write_params(trial)
        self.trials.append(trial)
        self.scheduler.on_trial_add(self, trial)
        publish.trial(self, trial, note="")
        impossible = self.actors.check_possible(
            trial.placement_group_factory.required_resources)
        if impossible:
            self.fail(trial, impossible, retry=False)
        return trial

    def dirname(self, trial: Trial) -> str:
        make = self.settings.trial_dirname_creator
        if make is not None:
            return str(make(trial))
        return f"{self.trainable_name}_{trial.trial_id}_{trial.experiment_tag}"

    def start(self, trial: Trial) -> bool:
        """Start ``trial`` on an actor if one fits now; False when it must wait."""
        if trial in self.running:  # paused, and its actor is still winding down
            return False
        key = actor_key(trial.resources, trial.bundles, trial.placement_strategy)
        if not self.actors.fits(trial.placement_group_factory.required_resources, key):
            return False
        slot, reused = self.actors.acquire(trial.resources, trial.bundles,
                                           trial.placement_strategy)
        restore, offset = self.restore_point(trial)
        spec = {
            "trial_id": trial.trial_id, "trial_name": str(trial),
            "config": trial.config, "trial_dir": trial.local_path,
            "experiment_name": self.storage.name, "resources": trial.resources,
            "bundles": trial.bundles, "checkpoint": restore, "iteration": offset,
            "checkpoint_index": _next_checkpoint_index(trial),
            "time_total": float(trial.last_result.get("time_total_s", 0.0) or 0.0),
            "checkpoint_frequency": self.settings.checkpoint_config.checkpoint_frequency,
            "checkpoint_at_end": bool(self.settings.checkpoint_config.checkpoint_at_end),
            "stop": self.stopper.criteria if isinstance(self.stopper, DictStopper) else None,
        }
        self.starts += 1
        spec["run_key"] = f"{trial.trial_id}/{self.starts}"
        work = ("tune", self.run_name, trial.trial_id, "work")
        self.running[trial] = _Run(slot, slot.handle.run.options(library_call=work).remote(spec),
                                   time.monotonic(), spec["run_key"], trial.trial_id)
        resumed = trial.status == Trial.PAUSED or trial.num_failures or restore is not None
        trial.status = Trial.RUNNING
        trial.stopping = ""
        publish.trial(self, trial, note="restored from checkpoint" if restore else "")
        if resumed:
            self.callbacks.on_trial_restore(self.iteration, self.trials, trial)
        self.callbacks.on_trial_start(self.iteration, self.trials, trial)
        return True

    def restore_point(self, trial: Trial) -> tuple[Checkpoint | None, int]:
        """The checkpoint to start from and the iteration it stands for."""
        if trial.restore_from is not None:  # PBT: another trial's state, this trial's count
            restore, trial.restore_from = trial.restore_from, None
            return restore, trial.iteration
        if trial.checkpoint is None:
            if trial.results:  # starts over: its old curve no longer describes it
                trial.results.clear()
                trial.last_result = {}
            return None, 0
        for checkpoint, result in reversed(trial.checkpoints):
            if checkpoint == trial.checkpoint:
                at = int(result.get("training_iteration", 0))
                # its curve resumes from the checkpoint: reports made after it are redone
                trial.results = [r for r in trial.results
                                 if int(r.get("training_iteration", 0)) <= at]
                trial.last_result = trial.results[-1] if trial.results else {}
                return checkpoint, at
        return trial.checkpoint, trial.iteration

    # ------------------------------------------------------------ reports
    def take_reports(self) -> None:
        """Wait for news from any running trial: its poll's reply, or, before its first poll,
        the end of its ``run``."""
        now = time.monotonic()
        for trial, run in list(self.running.items()):
            if run.decided_at and now - run.decided_at > STOP_GRACE_S:
                self.kill_run(trial)
                self.on_wound_down(trial, run)
        if not self.running:
            return
        timeout = WAIT_S
        for run in self.running.values():
            if run.poll_ref is None:
                due = run.started + FIRST_POLL_S - now
                if due <= 0:
                    self.send_poll(run, "")
                else:
                    timeout = min(timeout, due)
        refs: dict[Any, Trial] = {}
        for trial, run in self.running.items():
            refs[run.run_ref] = trial
            if run.poll_ref is not None:
                refs[run.poll_ref] = trial
        ready, rest = nbdist.wait(list(refs), num_returns=1, timeout=timeout)
        if ready and rest:
            more, _ = nbdist.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        # A poll's reply first: when a trial's poll and run end together, the poll's reports
        # come before those of the run's reply.
        ready.sort(key=lambda ref: not any(ref is run.poll_ref for run in self.running.values()))
        for ref in ready:
            trial = refs[ref]
            current = self.running.get(trial)
            if current is not None and (ref is current.poll_ref or ref is current.run_ref):
                self.on_reply(trial, current, ref)
        self.storage.flush()

    def send_poll(self, run: _Run, decision: str) -> None:
        mark = ("tune", self.run_name, run.trial_id)
        run.poll_ref = run.slot.handle.poll.options(library_call=mark).remote(
            run.key, decision, POLL_TIMEOUT_S)

    def on_reply(self, trial: Trial, run: _Run, ref: Any) -> None:
        try:
            results: list[dict[str, Any]] = []
            done = True
            if ref is run.poll_ref:
                results, done, _ = nbdist.get(ref)
                run.answered += 1
            if done:  # what no poll took is in run's reply
                leftovers, error, takes = self.run_reply(trial, run)
                if takes > run.answered:  # the poll in flight took reports: they come first
                    results = self.last_poll(trial, run) + results
                elif ref is run.run_ref and run.poll_ref is not None:
                    logger.debug("trial %s ended with a poll unanswered", trial.trial_id)
                results = results + leftovers
        except Exception as exc:  # the actor died (killed, out of memory): retry or fail
            self.kill_run(trial)
            self.fail(trial, _died(exc), retry=True)
            return
        for result in results:
            if result.get("__final"):
                self.on_checkpoint(trial, result["__checkpoint"], trial.last_result)
            elif not run.decision:
                run.decision = self.on_result(trial, result)
        if run.decision and not run.decided_at:
            run.decided_at = time.monotonic()
        if done:
            self.on_done(trial, run, error)
        else:
            decision = run.decision if run.decision != CONTINUE else ""
            if run.save:
                run.save = False
                decision = f"{decision}+{SAVE}" if decision else SAVE
            self.send_poll(run, decision)

    @staticmethod
    def run_reply(trial: Trial, run: _Run) -> tuple[list[dict[str, Any]], Any, int]:
        """The reply of a ``run`` that has ended (its poll said so, or it is ready)."""
        try:
            leftovers, error, takes = nbdist.get(run.run_ref, timeout=REPLY_DEADLINE_S)
        except nbdist.exceptions.GetTimeoutError:
            raise TuneError(f"the actor of trial {trial.trial_id} said the trial ended but its "
                            f"run did not return within {REPLY_DEADLINE_S:g} s") from None
        return leftovers, error, takes

    @staticmethod
    def last_poll(trial: Trial, run: _Run) -> list[dict[str, Any]]:
        """The reports of the poll in flight when the trial's ``run`` ended, which took some
        of them (its reply is on its way)."""
        try:
            results, _, _ = nbdist.get(run.poll_ref, timeout=REPLY_DEADLINE_S)
        except nbdist.exceptions.GetTimeoutError:
            raise TuneError(f"trial {trial.trial_id} ended, but the reply of a poll that took "
                            f"some of its reports did not come within {REPLY_DEADLINE_S:g} s"
                            ) from None
        run.answered += 1
        return list(results)

    def on_done(self, trial: Trial, run: _Run, error: Any) -> None:
        del self.running[trial]
        if error is not None:
            blob, text = error
            self.actors.release(run.slot, reusable=True)
            self.fail(trial, text, retry=True, cause=_load(blob))
        else:
            self.actors.release(run.slot, reusable=True)
            self.on_wound_down(trial, run)

    def on_wound_down(self, trial: Trial, run: _Run) -> None:
        """The trial's actor no longer runs it (ended, stopped, or killed after a decision)."""
        if run.decision == PAUSE or run.restart:
            trial.status = Trial.PENDING if run.restart else Trial.PAUSED
            publish.trial(self, trial, note=f"paused by {type(self.scheduler).__name__}"
                          if not run.restart else "restarting from another trial's checkpoint")
        else:
            self.complete(trial, note=trial.stopping)

    def on_result(self, trial: Trial, result: dict[str, Any]) -> str:
        """Book one report; the decision for the trial ("" or CONTINUE: go on)."""
        checkpoint = result.pop("__checkpoint", None)
        result["config"] = trial.config
        trial.last_result = result
        trial.results.append(result)
        self.storage.append_result(trial, result)
        if checkpoint is not None:
            self.on_checkpoint(trial, checkpoint, result)
        stop = bool(result.get("done")) or self.stopper(trial.trial_id, result)
        # As Ray: a met stop criterion is the controller's decision, so the scheduler is not
        # asked, and the searcher hears only of results after which the trial goes on (both
        # get the last result with on_trial_complete).
        decision = STOP if stop else self.scheduler.on_trial_result(self, trial, result)
        if decision != STOP:
            self.source.on_trial_result(trial.trial_id, result)
        note = ""
        if stop:
            decision = STOP
            trial.stopping = "stopping criterion met"
        elif decision == STOP:
            trial.stopping = (f"stopped by {type(self.scheduler).__name__} at iteration "
                              f"{trial.iteration}")
            note = trial.stopping
        elif decision == PAUSE:
            note = f"paused by {type(self.scheduler).__name__} at iteration {trial.iteration}"
        elif trial.restore_from is not None:  # CONTINUE with a donor: restart now (PBT)
            self.running[trial].restart = True
            decision = PAUSE
        # As in Ray, the decision is the trial's status at once (schedulers read it, e.g.
        # HyperBand counting the paused trials of a bracket); its actor winds down meanwhile.
        if decision == STOP:
            trial.status = Trial.TERMINATED
        elif decision == PAUSE:
            trial.status = Trial.PAUSED
        self.callbacks.on_trial_result(self.iteration, self.trials, trial, result)
        # As Ray: a callback may ask for a checkpoint by setting the key in the result it got
        # (a pause saves one anyway; a result that brought a checkpoint needs no other).
        if result.get(SHOULD_CHECKPOINT) and checkpoint is None and decision != PAUSE:
            self.running[trial].save = True
        publish.trial(self, trial, note=note)
        return decision if decision in (STOP, PAUSE) else ""

    def on_checkpoint(self, trial: Trial, checkpoint: Checkpoint, result: dict[str, Any]
                      ) -> None:
        trial.checkpoint = checkpoint
        trial.checkpoints.append((checkpoint, dict(result)))
        _prune(trial, self.settings.checkpoint_config)
        self.callbacks.on_checkpoint(self.iteration, self.trials, trial, checkpoint)
        self.callbacks.on_trial_save(self.iteration, self.trials, trial)
        publish.trial(self, trial, note="checkpoint saved")

    # ------------------------------------------------------------ endings
    def complete(self, trial: Trial, note: str = "") -> None:
        trial.status = Trial.TERMINATED
        self.scheduler.on_trial_complete(self, trial, trial.last_result)
        self.source.on_trial_complete(trial.trial_id, trial.last_result)
        self.storage.close_trial(trial)
        self.callbacks.on_trial_complete(self.iteration, self.trials, trial)
        publish.trial(self, trial, note=note)

    def fail(self, trial: Trial, text: str, *, retry: bool, cause: Any = None) -> None:
        trial.num_failures += 1
        trial.error_file = self.storage.write_error(trial, text)
        limit = self.settings.failure_config.max_failures
        if retry and (limit < 0 or trial.num_failures <= limit):
            trial.status = Trial.PENDING
            self.callbacks.on_trial_recover(self.iteration, self.trials, trial)
            publish.trial(self, trial, note=f"error, restarting (failure {trial.num_failures})",
                          status="RESTARTING")
            return
        trial.status = Trial.ERROR
        trial.error = text
        trial.error_cause = cause
        self.scheduler.on_trial_error(self, trial)
        self.source.on_trial_complete(trial.trial_id, None, error=True)
        self.storage.close_trial(trial)
        self.callbacks.on_trial_error(self.iteration, self.trials, trial)
        publish.trial(self, trial, note="error")
        self.save_state(force=True)
        fail_fast = self.settings.failure_config.fail_fast
        if fail_fast:
            self.end_all("fail fast")
            if fail_fast == "raise":
                raise TuneError(f"trial {trial.trial_id} failed (fail_fast='raise'):\n{text}")

    def kill_run(self, trial: Trial) -> None:
        run = self.running.pop(trial, None)
        if run is not None:
            self.actors.kill(run.slot)

    def interrupt(self) -> None:
        """KeyboardInterrupt: kill every trial actor now; running trials become PAUSED."""
        self.interrupted = True
        self.ending = "interrupted"
        for trial, run in list(self.running.items()):
            self.running.pop(trial)
            trial.status = Trial.TERMINATED if run.decision == STOP else Trial.PAUSED
            publish.trial(self, trial, note="interrupted")
        self.actors.shutdown()

    def finish(self) -> None:
        try:
            for trial, run in list(self.running.items()):
                self.kill_run(trial)
                trial.status = Trial.TERMINATED if run.decision == STOP else Trial.PAUSED
            self.actors.shutdown()
        finally:
            self.save_state(force=True)
            self.storage.close()
            self.callbacks.on_experiment_end(self.trials)

    def save_state(self, force: bool = False) -> None:
        try:
            state = {"trials": [_trial_state(t) for t in self.trials],
                     "source": self.source.get_state(), "counter": self.counter,
                     "run_id": self.run_id}
            self.storage.save_state(state, force=force)
        except Exception:
            logger.warning("could not save the experiment state:\n%s", traceback.format_exc())


def _next_checkpoint_index(trial: Trial) -> int:
    names = [c.path.rsplit("checkpoint_", 1)[-1] for c, _ in trial.checkpoints]
    return max((int(n) for n in names if n.isdigit()), default=-1) + 1


def _prune(trial: Trial, config: Any) -> None:
    """Keep ``num_to_keep`` checkpoints: the latest, or the best by the score attribute; the
    trial's current checkpoint is always kept."""
    keep = config.num_to_keep
    if keep is None or len(trial.checkpoints) <= keep:
        return
    ordered = list(trial.checkpoints)
    attr = config.checkpoint_score_attribute
    if attr:
        sign = 1.0 if config.checkpoint_score_order == "max" else -1.0
        ordered.sort(key=lambda cr: sign * float(cr[1].get(attr, float("-inf") * sign)))
    victims = [cr for cr in ordered[:len(ordered) - keep] if cr[0] != trial.checkpoint]
    import shutil

    for checkpoint, result in victims:
        trial.checkpoints.remove((checkpoint, result))
        shutil.rmtree(checkpoint.path, ignore_errors=True)


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def _died(exc: BaseException) -> str:
    if isinstance(exc, nbdist.exceptions.ActorError):
        return (f"{type(exc).__name__}: the trial's process died ({exc}); a trial is retried "
                "from its last checkpoint while FailureConfig(max_failures) allows")
    return f"{type(exc).__name__}: {exc}"


def _load(blob: bytes | None) -> BaseException | None:
    if blob is None:
        return None
    try:
        import cloudpickle

        value = cloudpickle.loads(blob)
    except Exception:
        return None
    return value if isinstance(value, BaseException) else None


def _trial_state(trial: Trial) -> dict[str, Any]:
    return {
        "trial_id": trial.trial_id, "config": trial.config, "status": trial.status,
        "trainable_name": trial.trainable_name, "experiment_tag": trial.experiment_tag,
        "evaluated_params": trial.evaluated_params, "resources": trial.resources,
        "bundles": trial.bundles, "placement_strategy": trial.placement_strategy,
        "last_result": trial.last_result, "checkpoint": trial.checkpoint,
        "checkpoints": trial.checkpoints, "error": trial.error, "error_file": trial.error_file,
        "num_failures": trial.num_failures, "local_path": trial.local_path,
        "relative_logdir": trial.relative_logdir, "custom_trial_name": trial.custom_trial_name,
    }
