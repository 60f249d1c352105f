"""The schedulers' decisions, driven with ``Trial`` records and results: no processes.

Each expected decision is Ray Tune 2.60's, worked out by hand in the comments. ``Controller``
is the little the schedulers read from the runner (``get_trials``, ``get_live_trials``,
``stop_trial``).
"""

from __future__ import annotations

import random

import pytest

from nbdist.tune.checkpoint import Checkpoint
from nbdist.tune.experiment.trial import Trial
from nbdist.tune.schedulers import (
    ASHAScheduler,
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    TrialScheduler,
    create_scheduler,
)
from nbdist.tune.search import sample as tune

CONTINUE, PAUSE, STOP = TrialScheduler.CONTINUE, TrialScheduler.PAUSE, TrialScheduler.STOP


class Controller:
    def __init__(self) -> None:
        self.trials: list[Trial] = []
        self.stopped: list[Trial] = []

    def add(self, scheduler: TrialScheduler, trial_id: str, status: str = Trial.RUNNING,
            **config) -> Trial:
        trial = Trial(trial_id, dict(config), experiment_tag=f"{len(self.trials)}_{trial_id}")
        self.trials.append(trial)
        scheduler.on_trial_add(self, trial)
        trial.status = status
        return trial

    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished]

    def stop_trial(self, trial: Trial) -> None:
        trial.status = Trial.TERMINATED
        self.stopped.append(trial)


def report(scheduler, controller, trial, it, **metrics):
    result = {"training_iteration": it, "trial_id": trial.trial_id, **metrics}
    trial.last_result = result
    trial.results.append(result)
    return scheduler.on_trial_result(controller, trial, result)


def test_fifo_runs_pending_before_paused_and_never_stops():
    fifo, c = FIFOScheduler(), Controller()
    paused = c.add(fifo, "p", Trial.PAUSED)
    pending = c.add(fifo, "q", Trial.PENDING)
    assert fifo.choose_trial_to_run(c) is pending
    pending.status = Trial.RUNNING
    assert fifo.choose_trial_to_run(c) is paused
    assert report(fifo, c, pending, 1, acc=-1e9) == CONTINUE


def test_asha_stops_a_trial_below_the_rungs_cutoff():
    asha = ASHAScheduler(metric="acc", mode="max", grace_period=1, reduction_factor=2, max_t=8)
    assert AsyncHyperBandScheduler is ASHAScheduler
    c = Controller()
    t1, t2, t3, t4 = (c.add(asha, f"t{i}") for i in range(1, 5))
    # Rungs at 1, 2, 4, 8 (int(log2(8/1)) + 1 = 4); cutoff = 50th percentile (1 - 1/2).
    assert report(asha, c, t1, 1, acc=2) == CONTINUE  # rung 1 empty: recorded {2}
    assert report(asha, c, t2, 1, acc=4) == CONTINUE  # cutoff(2) = 2; 4 >= 2
    assert report(asha, c, t3, 1, acc=1) == STOP  # cutoff(2, 4) = 3; 1 < 3
    assert report(asha, c, t4, 1, acc=2.5) == CONTINUE  # cutoff(2, 4, 1) = 2; 2.5 >= 2
    # Between rungs nothing is judged, however bad.
    assert report(asha, c, t4, 1, acc=-100) == CONTINUE
    assert report(asha, c, t1, 2, acc=2) == CONTINUE  # rung 2 empty
    assert report(asha, c, t4, 3, acc=1) == STOP  # rung 2 at t=3: cutoff(2) = 2; 1 < 2
    assert report(asha, c, t2, 8, acc=100) == STOP  # max_t reached


def test_asha_min_mode_compares_negated_scores():
    asha = ASHAScheduler(metric="loss", mode="min", grace_period=1, reduction_factor=2, max_t=8)
    c = Controller()
    a, b, d = (c.add(asha, n) for n in "abd")
    assert report(asha, c, a, 1, loss=1.0) == CONTINUE
    assert report(asha, c, b, 1, loss=3.0) == STOP  # scores -1 vs -3: cutoff -1; -3 < -1
    assert report(asha, c, d, 1, loss=0.5) == CONTINUE  # cutoff(-1, -3) = -2; -0.5 >= -2


def test_asha_without_metric_or_mode_refuses_trials():
    asha = ASHAScheduler()
    with pytest.raises(ValueError, match="metric"):
        Controller().add(asha, "t")
    assert asha.set_search_properties("acc", "max")
    Controller().add(asha, "t")
    assert not ASHAScheduler(metric="a", mode="max").set_search_properties("b", "min")


def _hyperband_with_second_bracket(controller: Controller):
    # max_t=4, eta=2: s_max + 1 = round(log 4 / log 2) + 1 = 3 brackets per band.
    # Bracket s=0: n0 = ceil(3 / 1 * 2**0) = 3 trials, r0 = int(4 * 2**0) = 4.
    # Bracket s=1: n0 = ceil(3 / 2 * 2**1) = 3 trials, r0 = int(4 * 2**-1) = 2.
    hb = HyperBandScheduler(metric="acc", mode="max", max_t=4, reduction_factor=2)
    for i in range(3):
        controller.add(hb, f"s0_{i}")
    a, b, d = (controller.add(hb, n) for n in ("a", "b", "d"))
    return hb, a, b, d


def test_hyperband_pauses_until_the_brackets_rung_completes_then_halves():
    c = Controller()
    hb, a, b, d = _hyperband_with_second_bracket(c)
    assert report(hb, c, a, 1, acc=5) == CONTINUE  # 1 < milestone 2
    assert report(hb, c, a, 2, acc=5) == PAUSE  # at the milestone; b, d are not
    a.status = Trial.PAUSED
    # A trial paused at the rung is not runnable until the rung completes.
    assert hb.choose_trial_to_run(c) is None
    assert report(hb, c, b, 2, acc=1) == PAUSE
    b.status = Trial.PAUSED
    # d completes the rung: keep ceil(3 / 2) = 2 of (b=1, d=3, a=5): d and a; b stops.
    # The milestone becomes min(2 * 2, 4) = 4, so d (at 2) continues.
    assert report(hb, c, d, 2, acc=3) == CONTINUE
    assert c.stopped == [b]
    # a is runnable again; the first bracket's trials are all running.
    assert hb.choose_trial_to_run(c) is a
    a.status = Trial.RUNNING
    assert report(hb, c, a, 3, acc=6) == CONTINUE
    assert report(hb, c, a, 4, acc=6) == PAUSE  # at 4; d is at 2
    a.status = Trial.PAUSED
    # d reaches the last milestone: no halving left, the bracket is done; a, paused, stops.
    assert report(hb, c, d, 4, acc=3) == STOP
    assert c.stopped == [b, a]


def test_hyperband_halves_without_waiting_for_a_trial_that_ended():
    c = Controller()
    hb, a, b, d = _hyperband_with_second_bracket(c)
    assert report(hb, c, a, 2, acc=5) == PAUSE
    a.status = Trial.PAUSED
    assert report(hb, c, b, 2, acc=4) == PAUSE
    b.status = Trial.PAUSED
    # d errors before the rung: the bracket is halved over a and b: keep ceil(3/2) = 2, both.
    d.status = Trial.ERROR
    hb.on_trial_error(c, d)
    assert c.stopped == []
    assert hb.choose_trial_to_run(c) in (a, b)


def test_median_stopping_rule_stops_a_trial_whose_best_is_below_the_median_of_running_means():
    rule = MedianStoppingRule(time_attr="training_iteration", metric="acc", mode="max",
                              grace_period=1, min_samples_required=2)
    c = Controller()
    a, b, x, y, z = (c.add(rule, n) for n in "abxyz")
    for it, (acc_a, acc_b) in enumerate([(10, 6), (10, 10)], start=1):
        # Fewer than 2 other trials have reached t, and nothing waits: go on.
        assert report(rule, c, a, it, acc=acc_a) == CONTINUE
        assert report(rule, c, b, it, acc=acc_b) == CONTINUE
    assert report(rule, c, x, 1, acc=1) == STOP  # best 1 < median(mean 10, mean 6) = 8
    # t=1: others a 10, b 6, x 1 (x reached t=1 too): median 6.
    assert report(rule, c, y, 1, acc=9.5) == CONTINUE
    # t=2: the others' running means over [grace 1, 2] are a (10 + 10) / 2 = 10 and
    # b (6 + 10) / 2 = 8: median 9 (their best results, 10 and 10, would give 10).
    assert report(rule, c, y, 2, acc=9.2) == CONTINUE  # best 9.5 >= 9
    # t=1: a 10, b 6, x 1, y 9.5: median (6 + 9.5) / 2 = 7.75.
    assert report(rule, c, z, 1, acc=9.4) == CONTINUE
    # t=2: a 10, b 8, y (9.5 + 9.2) / 2 = 9.35: median 9.35. z is judged by its best so
    # far, 9.4, not by its last result, 1.
    assert report(rule, c, z, 2, acc=1) == CONTINUE
    assert "num_stopped=1" in rule.debug_string()


def test_median_stopping_rule_yields_the_slot_while_samples_are_insufficient():
    rule = MedianStoppingRule(time_attr="training_iteration", metric="acc", mode="min",
                              grace_period=0, min_samples_required=1)
    c = Controller()
    a = c.add(rule, "a")
    waiting = c.add(rule, "w", Trial.PENDING)
    # No other trial at t=1 and one waits: PAUSE (min_time_slice 0 since its last pause).
    assert report(rule, c, a, 1, acc=5) == PAUSE
    waiting.status = Trial.RUNNING
    assert report(rule, c, waiting, 1, acc=6) == STOP  # min mode: best 6 > median 5
    assert report(rule, c, a, 2, acc=4) == CONTINUE  # nothing waits any more


def test_median_stopping_rule_soft_stop_pauses():
    rule = MedianStoppingRule(time_attr="training_iteration", metric="acc", mode="max",
                              grace_period=0, min_samples_required=1, hard_stop=False)
    c = Controller()
    a, b = c.add(rule, "a"), c.add(rule, "b")
    report(rule, c, a, 1, acc=5)
    assert report(rule, c, b, 1, acc=1) == PAUSE
    assert report(rule, c, b, 2, acc=0) == CONTINUE  # once paused, it later runs FIFO


def _pbt_population(tmp_path, **kwargs):
    pbt = PopulationBasedTraining(time_attr="training_iteration", metric="acc", mode="max",
                                  perturbation_interval=2, **kwargs)
    c = Controller()
    trials = []
    for i in range(4):
        trial = c.add(pbt, f"t{i}", lr=0.1 * (i + 1), other=i)
        trial.checkpoint = Checkpoint(str(tmp_path / f"ckpt{i}"))
        trials.append(trial)
    return pbt, c, trials


def test_pbt_exploits_the_bottom_quantile_from_the_top(tmp_path):
    pbt, c, (t0, t1, t2, t3) = _pbt_population(
        tmp_path, hyperparam_mutations={"lr": tune.choice([0.5])}, resample_probability=1.0)
    # Scores at t=2 arrive in rising order: 1, 2, 3, 4. With n scored trials the quantile
    # holds ceil(n * 0.25) of them: 1 each time (n=1 is no population yet). Each arrival is
    # the top one, and records its checkpoint; the bottom one (t0) does not report meanwhile.
    for trial, acc in ((t0, 1), (t1, 2), (t2, 3), (t3, 4)):
        assert report(pbt, c, trial, 2, acc=acc) == CONTINUE
        assert trial.restore_from is None
    assert report(pbt, c, t0, 3, acc=1.5) == CONTINUE  # 3 - 2 < perturbation_interval
    # At t=4 t0 (1.5) is the bottom quantile, t3 (4) the top: t0 takes t3's config, lr
    # resampled from choice([0.5]), and restarts from t3's checkpoint.
    assert report(pbt, c, t0, 4, acc=1.5) == CONTINUE
    assert t0.config == {"lr": 0.5, "other": 3}
    assert t0.restore_from is not None and t0.restore_from.path == t3.checkpoint.path
    assert t0.experiment_tag == "0_t0@perturbed[lr=0.5000]"
    assert t1.restore_from is None and t1.config["lr"] == pytest.approx(0.2)


def test_pbt_explore_shifts_list_values_and_perturbs_continuous_ones(tmp_path):
    random.seed(0)
    pbt, c, (t0, t1, t2, t3) = _pbt_population(
        tmp_path, hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4], "other": tune.uniform(0, 9)},
        resample_probability=0.0, perturbation_factors=(2.0, 2.0))
    for trial, acc in ((t0, 1), (t1, 2), (t2, 3), (t3, 4)):
        report(pbt, c, trial, 2, acc=acc)
    waiting = c.add(pbt, "w", Trial.PENDING, lr=0.1, other=1)
    # Another trial waits for a slot: the exploited trial yields it (PAUSE).
    assert report(pbt, c, t0, 4, acc=0) == PAUSE
    # t3 had lr 0.4 (the last of the list): a shift lands on 0.3 or stays at 0.4; other 3 * 2,
    # cast back to int as it started as one.
    assert t0.config["lr"] in (pytest.approx(0.3), pytest.approx(0.4))
    assert t0.config["other"] == 6 and type(t0.config["other"]) is int
    # The least trained waiting trial runs first: w (t=0) before t0 (t=2, its donor's).
    t0.status = Trial.PAUSED
    assert pbt.choose_trial_to_run(c) is waiting


def test_pbt_does_not_exploit_a_donor_without_checkpoint(tmp_path):
    pbt, c, trials = _pbt_population(tmp_path, hyperparam_mutations={"lr": [0.1, 0.2]})
    for trial in trials:
        trial.checkpoint = None
    for trial, acc in zip(trials, (1, 2, 3, 4), strict=True):
        report(pbt, c, trial, 2, acc=acc)
    report(pbt, c, trials[0], 4, acc=0)
    assert trials[0].restore_from is None and trials[0].config["lr"] == pytest.approx(0.1)


def test_pbt_fills_missing_hyperparameters_and_validates_arguments():
    pbt = PopulationBasedTraining(metric="acc", mode="max",
                                  hyperparam_mutations={"lr": [0.5], "opt": {"m": [0.9]}})
    trial = Controller().add(pbt, "t")
    assert trial.config == {"lr": 0.5, "opt": {"m": 0.9}}
    with pytest.raises(ValueError, match="quantile_fraction"):
        PopulationBasedTraining(hyperparam_mutations={"lr": [1]}, quantile_fraction=0.6)
    with pytest.raises(ValueError, match="sample_from"):
        PopulationBasedTraining(hyperparam_mutations={"lr": tune.sample_from(lambda: 1)})
    with pytest.raises(ValueError, match="hyperparam_mutations or custom_explore_fn"):
        PopulationBasedTraining()


def test_pbt_requires_its_attributes_in_results(tmp_path):
    pbt, c, (t0, *_) = _pbt_population(tmp_path, hyperparam_mutations={"lr": [0.1]})
    with pytest.raises(RuntimeError, match="'acc'"):
        report(pbt, c, t0, 2, loss=1)


def test_create_scheduler_by_name():
    assert isinstance(create_scheduler("async_hyperband", metric="a", mode="max"),
                      AsyncHyperBandScheduler)
    with pytest.raises(ValueError, match="unknown scheduler"):
        create_scheduler("nope")


def test_scheduler_state_round_trips_through_save_and_restore(tmp_path):
    asha = ASHAScheduler(metric="acc", mode="max", grace_period=1, reduction_factor=2, max_t=8)
    c = Controller()
    a = c.add(asha, "a")
    report(asha, c, a, 1, acc=2)
    asha.save(str(tmp_path / "s.pkl"))
    restored = ASHAScheduler()
    restored.restore(str(tmp_path / "s.pkl"))
    b = Trial("b", {})
    restored.on_trial_add(c, b)
    # The rung at 1 remembers a's 2: b's 1 is below the cutoff.
    assert report(restored, c, b, 1, acc=1) == STOP


def test_synchronous_pbt_waits_for_the_population_then_exploits(tmp_path):
    pbt, c, (t0, t1, t2, t3) = _pbt_population(
        tmp_path, hyperparam_mutations={"lr": tune.choice([0.5])}, resample_probability=1.0,
        synch=True)
    # Each trial reaching the interval (t=2) pauses while others have not reached it.
    for trial, acc in ((t0, 1), (t1, 2), (t2, 3)):
        assert report(pbt, c, trial, 2, acc=acc) == PAUSE
        trial.status = Trial.PAUSED
        assert t0.restore_from is None
    # The last arrival ranks all four at once: ceil(4 * 0.25) = 1 per quantile; t0 (1) takes
    # t3's (4) config and checkpoint, and t3 pauses like the rest.
    assert report(pbt, c, t3, 2, acc=4) == PAUSE
    assert t0.config == {"lr": 0.5, "other": 3}
    assert t0.restore_from is not None and t0.restore_from.path == t3.checkpoint.path
    t3.status = Trial.PAUSED
    # Next synchronisation at max(2 + 2, 2) = 4: every trial (at t=2) may run again.
    assert pbt.choose_trial_to_run(c) in (t0, t1, t2, t3)


def test_pbt_logs_each_exploit_in_the_experiment_directory(tmp_path):
    pbt, c, trials = _pbt_population(tmp_path, hyperparam_mutations={"lr": [0.1, 0.2]})
    for trial in trials:
        trial.local_path = str(tmp_path / "exp" / trial.trial_id)
    (tmp_path / "exp").mkdir()
    for trial, acc in zip(trials, (1, 2, 3, 4), strict=True):
        report(pbt, c, trial, 2, acc=acc)
    report(pbt, c, trials[0], 4, acc=0)
    [line] = (tmp_path / "exp" / "pbt_global.txt").read_text().splitlines()
    # [target tag, donor tag, target iteration, donor iteration, donor config, new config]
    assert line.startswith('["0_t0", "3_t3", 4, 2, {"lr"')
    assert (tmp_path / "exp" / "pbt_policy_t0.txt").read_text().splitlines() == [line]


def test_pbt_refuses_a_searcher():
    from nbdist.tune.search import make_trial_source
    from nbdist.tune.search.optuna import OptunaSearch

    pbt = PopulationBasedTraining(metric="acc", mode="max", hyperparam_mutations={"lr": [1]})
    c = Controller()
    c.source = make_trial_source(OptunaSearch(), {"x": tune.uniform(0, 1)}, 1, "acc", "max")
    with pytest.raises(ValueError, match="searcher"):
        c.add(pbt, "t")


@pytest.mark.parametrize("make", [
    lambda: MedianStoppingRule(metric="acc", mode="max", grace_period=0),
    lambda: PopulationBasedTraining(metric="acc", mode="max", custom_explore_fn=lambda c: c),
    lambda: HyperBandScheduler(metric="acc", mode="max", max_t=4, reduction_factor=2),
])
def test_every_scheduler_can_be_saved_mid_run(tmp_path, make):
    scheduler, c = make(), Controller()
    trial = c.add(scheduler, "a", lr=1)
    report(scheduler, c, trial, 1, acc=1, time_total_s=1.0)
    scheduler.save(str(tmp_path / "s.pkl"))
    restored = make()
    restored.restore(str(tmp_path / "s.pkl"))
    assert restored.debug_string() == scheduler.debug_string()


@pytest.mark.parametrize("make", [ASHAScheduler, HyperBandScheduler, MedianStoppingRule])
def test_a_mode_other_than_min_or_max_is_refused(make):
    with pytest.raises(ValueError, match="'min' or 'max'"):
        make(metric="acc", mode="maximize")
