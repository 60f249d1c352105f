"""Searchers behind the trial source: ConcurrencyLimiter, OptunaSearch, BayesOptSearch.

No processes: configs are asked for and results told as the runner does. Optuna and
bayesian-optimization are the real packages (the ``tune`` extra).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nbdist.tune.search import (
    BasicVariantGenerator,
    BayesOptSearch,
    ConcurrencyLimiter,
    OptunaSearch,
    Repeater,
    Searcher,
    create_searcher,
    make_trial_source,
)
from nbdist.tune.search import sample as tune


class Counting(Searcher):
    """Suggests {"i": n} in turn and records what it is told."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__(metric="m", mode="max")
        self.n = 0
        self.limit = limit
        self.completed: list[str] = []

    def suggest(self, trial_id):
        if self.limit is not None and self.n >= self.limit:
            return Searcher.FINISHED
        self.n += 1
        return {"i": self.n}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append(trial_id)


def test_concurrency_limiter_holds_suggestions_until_a_live_trial_completes():
    inner = Counting()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert limiter.suggest("a") == {"i": 1}
    assert limiter.suggest("b") == {"i": 2}
    assert limiter.suggest("c") is None
    assert inner.n == 2  # the searcher was not asked
    limiter.on_trial_complete("a", {"m": 1})
    assert inner.completed == ["a"]
    assert limiter.suggest("c") == {"i": 3}
    with pytest.raises(ValueError, match="positive"):
        ConcurrencyLimiter(inner, max_concurrent=0)


def test_concurrency_limiter_batch_reports_when_the_whole_batch_is_done():
    inner = Counting()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2, batch=True)
    limiter.suggest("a")
    limiter.suggest("b")
    limiter.on_trial_complete("a", {"m": 1})
    assert inner.completed == [] and limiter.suggest("c") is None
    limiter.on_trial_complete("b", {"m": 2})
    assert inner.completed == ["a", "b"]
    assert limiter.suggest("c") == {"i": 3}


def test_searcher_source_merges_constants_tags_from_one_and_stops_at_num_samples():
    source = make_trial_source(Counting(), {"const": 5, "nested": {"k": "v"}}, 3, "m", "max")
    assert source.total() == 3
    got = [source.next_config(f"t{i}") for i in range(3)]
    assert got[0] == ({"const": 5, "nested": {"k": "v"}, "i": 1}, "1_const=5,i=1,k=v")
    assert [tag.split("_")[0] for _, tag in got] == ["1", "2", "3"]
    assert source.finished() and source.next_config("t3") is None


def test_searcher_source_ends_when_the_searcher_is_finished():
    source = make_trial_source(Counting(limit=1), {}, 10, "m", "max")
    assert source.next_config("a") is not None
    assert not source.finished()
    assert source.next_config("b") is None
    assert source.finished()


def test_searcher_source_limits_concurrency_with_max_concurrent():
    source = make_trial_source(Counting(), {}, 10, "m", "max", max_concurrent=1)
    assert source.next_config("a") is not None
    assert source.next_config("b") is None
    source.on_trial_complete("a", {"m": 1})
    assert source.next_config("b") is not None


def test_a_space_in_both_the_searcher_and_param_space_is_refused():
    searcher = OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="m", mode="max")
    with pytest.raises(ValueError, match="one place"):
        make_trial_source(searcher, {"y": tune.uniform(0, 1)}, 2, None, None)


def _run(source, objective, n):
    best = None
    for i in range(n):
        item = source.next_config(f"t{i}")
        assert item is not None
        config, _ = item
        value = objective(config)
        source.on_trial_result(f"t{i}", {"loss": value, "training_iteration": 1})
        source.on_trial_complete(f"t{i}", {"loss": value, "training_iteration": 1})
        best = value if best is None else min(best, value)
    return best


def test_optuna_samples_every_domain_kind_within_bounds_nested():
    space = {"lr": tune.loguniform(1e-4, 1e-1), "layers": tune.randint(1, 4),
             "act": tune.choice(["relu", "tanh"]), "q": tune.qrandint(0, 10, 5),
             "opt": {"m": tune.quniform(0, 1, 0.5)}, "fixed": "yes"}
    source = make_trial_source(OptunaSearch(seed=1), space, 25, "loss", "min")
    seen = []
    for i in range(25):
        config, _ = source.next_config(f"t{i}")
        seen.append(config)
        source.on_trial_complete(f"t{i}", {"loss": config["lr"]})
    for c in seen:
        assert 1e-4 <= c["lr"] <= 1e-1
        assert c["layers"] in (1, 2, 3)  # randint excludes 4
        assert c["act"] in ("relu", "tanh") and c["q"] in (0, 5, 10)
        assert c["opt"]["m"] in (0.0, 0.5, 1.0) and c["fixed"] == "yes"
    assert {c["layers"] for c in seen} == {1, 2, 3}


def test_optuna_is_reproducible_with_a_seed_and_learns_from_results():
    def objective(config):
        return (config["x"] - 2) ** 2

    def best(seed):
        source = make_trial_source(OptunaSearch(seed=seed), {"x": tune.uniform(-10, 10)}, 40,
                                   "loss", "min")
        return _run(source, objective, 40)

    assert best(3) == best(3)
    # TPE after 40 results; 40 uniform draws from [-10, 10] land within 0.3 of 2 with
    # probability 1 - (1 - 0.03)**40 = 0.70, TPE reliably within 0.1 (loss 0.01).
    assert best(3) < 0.01


def test_optuna_tells_the_study_complete_pruned_and_failed_trials():
    searcher = OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="loss", mode="min", seed=0)
    source = make_trial_source(searcher, {}, 3, None, None)
    for trial_id in ("ok", "pruned", "failed"):
        source.next_config(trial_id)
    source.on_trial_result("ok", {"loss": 0.5, "training_iteration": 1})
    source.on_trial_complete("ok", {"loss": 0.25})
    source.on_trial_complete("pruned", {"other": 1})
    source.on_trial_complete("failed", None, error=True)
    trials = searcher._study.trials
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED", "FAIL"]
    assert trials[0].value == 0.25 and trials[0].intermediate_values == {1: 0.5}


def test_optuna_points_to_evaluate_and_define_by_run():
    searcher = OptunaSearch(space={"x": tune.uniform(0, 1), "n": {"y": tune.choice([1, 2])}},
                            metric="loss", mode="min", points_to_evaluate=[{"x": 0.3, "n": {"y": 2}}])
    assert searcher.suggest("a") == {"x": 0.3, "n": {"y": 2}}

    def define_by_run(trial):
        kind = trial.suggest_categorical("kind", ["a", "b"])
        if kind == "a":
            trial.suggest_float("a/size", 0, 1)
        return {"const": 1}

    searcher = OptunaSearch(space=define_by_run, metric="loss", mode="min", seed=0)
    configs = [searcher.suggest(f"t{i}") for i in range(10)]
    for c in configs:
        assert c["const"] == 1
        assert ("a" in c) == (c["kind"] == "a")
        if c["kind"] == "a":
            assert 0 <= c["a"]["size"] <= 1


def test_optuna_refuses_what_it_cannot_sample():
    with pytest.raises(ValueError, match="grid_search"):
        make_trial_source(OptunaSearch(), {"x": tune.grid_search([1, 2])}, 2, "m", "max")
    with pytest.raises(ValueError, match="cannot convert"):
        make_trial_source(OptunaSearch(), {"x": tune.randn()}, 2, "m", "max")


def test_bayesopt_buffers_random_steps_then_fits_the_gp():
    searcher = BayesOptSearch(random_search_steps=2, random_state=0)
    source = make_trial_source(searcher, {"x": tune.uniform(-3, 3), "c": 1}, 12, "loss", "min")
    a, b = source.next_config("a"), source.next_config("b")
    assert a is not None and b is not None and a[0]["c"] == 1
    # Two random steps are out and none has a result: no third proposal yet.
    assert source.next_config("c") is None
    source.on_trial_complete("a", {"loss": a[0]["x"] ** 2})
    assert len(searcher.optimizer.space) == 0  # buffered until both are in
    source.on_trial_complete("b", {"loss": b[0]["x"] ** 2})
    assert len(searcher.optimizer.space) == 2
    # Registered as -loss (mode min).
    assert max(searcher.optimizer.space.target) == -min(a[0]["x"] ** 2, b[0]["x"] ** 2)
    got = source.next_config("c")
    assert got is not None and -3 <= got[0]["x"] <= 3


def test_bayesopt_takes_uniform_floats_only():
    for domain in (tune.randint(0, 3), tune.loguniform(1e-3, 1), tune.choice([1, 2])):
        with pytest.raises(ValueError, match="uniform float"):
            make_trial_source(BayesOptSearch(), {"x": domain}, 2, "m", "max")
    with pytest.raises(ValueError, match="grid_search"):
        make_trial_source(BayesOptSearch(), {"x": tune.grid_search([1.0])}, 2, "m", "max")


def test_create_searcher_by_name():
    assert isinstance(create_searcher("Optuna", metric="m", mode="max"), OptunaSearch)
    # Ray drops what a class does not take: the variant generator has no metric.
    assert isinstance(create_searcher("random", metric="m"), BasicVariantGenerator)
    with pytest.raises(ValueError, match="unknown search algorithm"):
        create_searcher("nope")


def test_searcher_state_round_trips(tmp_path):
    searcher = OptunaSearch(space={"x": tune.uniform(0, 1)}, metric="loss", mode="min", seed=0)
    for i in range(3):
        searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", {"loss": i})
    path = str(tmp_path / "searcher.pkl")
    searcher.save(path)
    restored = OptunaSearch()
    restored.restore(path)
    assert len(restored._study.trials) == 3
    assert 0 <= restored.suggest("t3")["x"] <= 1


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)


def test_importing_the_algorithms_does_not_import_the_optional_packages():
    done = _python("""
        import sys
        import nbdist.tune.search, nbdist.tune.schedulers
        from nbdist.tune.search import make_trial_source, sample
        make_trial_source(None, {"x": sample.uniform(0, 1)}, 1, None, None)
        print(sorted(m for m in ("optuna", "bayes_opt") if m in sys.modules))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name, module", [("OptunaSearch", "optuna"),
                                          ("BayesOptSearch", "bayes_opt")])
def test_a_missing_optional_package_names_the_extra(name, module):
    done = _python(f"""
        import sys
        sys.modules[{module!r}] = None  # as if not installed: importing it raises ImportError
        from nbdist.tune.search import {name}
        try:
            {name}()
        except ImportError as exc:
            print(exc)
    """)
    assert done.returncode == 0, done.stderr
    assert 'pip install "nbdist[tune]"' in done.stdout


def test_repeater_runs_each_config_repeat_times_and_reports_the_mean():
    inner = Counting()
    told = []
    inner.on_trial_complete = lambda trial_id, result=None, error=False: told.append(
        (trial_id, result))
    source = make_trial_source(Repeater(inner, repeat=3), {}, 6, "m", "max")
    configs = [source.next_config(f"t{i}")[0] for i in range(6)]
    assert [(c["i"], c["__trial_index__"]) for c in configs] == [
        (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    for i, score in enumerate((1.0, 2.0, 6.0)):
        assert told == []
        source.on_trial_complete(f"t{i}", {"m": score})
    # The searcher sees the group once, under its first trial id, with the mean (1 + 2 + 6) / 3.
    assert told == [("t0", {"m": 3.0})]


def test_bayesopt_skips_repeated_proposals_and_finishes_past_patience():
    searcher = BayesOptSearch(space={"x": tune.uniform(0, 2)}, metric="m", mode="max",
                              points_to_evaluate=[{"x": 1.0}] * 3, patience=2)
    assert searcher.suggest("a") == {"x": 1.0}
    assert searcher.suggest("b") is None  # seen once before: skipped (2 <= patience)
    assert searcher.suggest("c") == Searcher.FINISHED  # proposed 3 times > patience 2
