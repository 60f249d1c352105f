"""Search spaces and the basic variant generator, without processes.

Expected values follow Ray Tune 2.60: grid axes sorted by path, the first varying fastest;
``num_samples`` passes over the grid; tags ``<index>_<last key>=<value>,...`` with floats as
``%.4f``; ``randint`` excludes its upper bound, ``qrandint`` includes it.
"""

from __future__ import annotations

import numpy as np
import pytest

from nbdist.tune.search import BasicVariantGenerator, make_trial_source
from nbdist.tune.search import sample as tune
from nbdist.tune.search.variant_generator import RecursiveDependencyError, format_vars


def _drain(source, limit=1000):
    out = []
    for i in range(limit):
        if source.finished():
            break
        item = source.next_config(f"t{i}")
        if item is None:
            break
        out.append(item)
    return out


def test_grids_cross_first_axis_fastest_times_num_samples_with_ray_tags():
    space = {"b": tune.grid_search(["x", "y"]), "a": tune.grid_search([1, 2]), "c": 3}
    source = make_trial_source(None, space, num_samples=2, metric=None, mode=None)
    # 2 values x 2 values x 2 samples.
    assert source.total() == 8
    got = _drain(source)
    assert [(c["a"], c["b"]) for c, _ in got] == [
        (1, "x"), (2, "x"), (1, "y"), (2, "y")] * 2
    assert [tag for _, tag in got][:4] == ["0_a=1,b=x", "1_a=2,b=x", "2_a=1,b=y", "3_a=2,b=y"]
    assert got[7][1] == "7_a=2,b=y"
    assert all(c["c"] == 3 for c, _ in got)
    assert source.finished()
    assert source.next_config("extra") is None


def test_tag_formats_floats_and_uses_the_last_key_of_nested_paths():
    space = {"optim": {"lr": tune.grid_search([0.01])}, "momentum": tune.grid_search([0.9])}
    [(config, tag)] = _drain(make_trial_source(None, space, 1, None, None))
    assert config == {"optim": {"lr": 0.01}, "momentum": 0.9}
    # Paths sorted: ("config", "momentum") < ("config", "optim", "lr").
    assert tag == "0_momentum=0.9000,lr=0.0100"
    assert format_vars({("config", "name"): "a b/c"}) == "name=a_b_c"


def test_sample_from_reads_grid_values_and_other_sampled_values_through_spec_config():
    space = {
        "a": tune.grid_search([1, 2]),
        "double_a": tune.sample_from(lambda spec: spec.config.a * 10),
        "y": tune.sample_from(lambda spec: spec.config.nested.x + 1),
        "nested": {"x": tune.uniform(0, 1)},
        "no_arg": tune.sample_from(lambda: "constant"),
    }
    got = [config for config, _ in _drain(make_trial_source(None, space, 1, None, None))]
    assert [c["double_a"] for c in got] == [10, 20]
    for c in got:
        assert c["y"] == pytest.approx(c["nested"]["x"] + 1)
        assert c["no_arg"] == "constant"


def test_sample_from_returning_a_grid_is_expanded():
    space = {"a": tune.sample_from(lambda: tune.grid_search([1, 2, 3]))}
    got = [config["a"] for config, _ in _drain(make_trial_source(None, space, 1, None, None))]
    assert got == [1, 2, 3]


def test_a_cycle_of_sample_from_functions_is_reported():
    space = {"a": tune.sample_from(lambda spec: spec.config.b),
             "b": tune.sample_from(lambda spec: spec.config.a)}
    with pytest.raises(RecursiveDependencyError):
        _drain(make_trial_source(None, space, 1, None, None))


def test_a_failing_sample_from_names_its_path():
    space = {"outer": {"bad": tune.sample_from(lambda: 1 / 0)}}
    with pytest.raises(ValueError, match="outer/bad"):
        _drain(make_trial_source(None, space, 1, None, None))


def test_domain_bounds_as_ray():
    rng = np.random.default_rng(0)
    ints = tune.randint(0, 3).sample(size=300, random_state=rng)
    # randint excludes its upper bound.
    assert set(ints) == {0, 1, 2}
    assert all(type(v) is int for v in ints)
    # qrandint includes it: multiples of 5 in [0, 10].
    assert set(tune.qrandint(0, 10, 5).sample(size=300, random_state=rng)) == {0, 5, 10}
    assert set(tune.qrandint(0, 3).sample(size=300, random_state=rng)) == {0, 1, 2, 3}
    assert set(tune.quniform(0, 1, 0.25).sample(size=300, random_state=rng)) <= {
        0.0, 0.25, 0.5, 0.75, 1.0}
    logs = tune.loguniform(1e-4, 1e-1).sample(size=300, random_state=rng)
    assert min(logs) >= 1e-4 and max(logs) <= 1e-1
    # Log-uniform: about a third of the draws per decade.
    assert 60 < sum(v < 1e-3 for v in logs) < 140
    assert set(tune.lograndint(1, 3).sample(size=200, random_state=rng)) == {1, 2}
    floats = tune.uniform(-2, 3).sample(size=300, random_state=rng)
    assert min(floats) >= -2 and max(floats) <= 3
    assert abs(np.mean(tune.randn(10, 1).sample(size=500, random_state=rng)) - 10) < 0.3
    assert set(tune.qrandn(0, 5, 2).sample(size=100, random_state=rng)) <= {
        float(v) for v in range(-40, 41, 2)}


def test_choice_keeps_the_categories_own_objects_and_types():
    categories = [{"layers": 2}, None, "relu", 3]
    values = tune.choice(categories).sample(size=100, random_state=1)
    assert {repr(v) for v in values} == {repr(c) for c in categories}
    assert any(v is categories[0] for v in values)


def test_invalid_domains_raise_clear_errors():
    with pytest.raises(ValueError, match="positive lower bound"):
        tune.loguniform(0, 1)
    with pytest.raises(ValueError, match="multiple of q"):
        tune.quniform(0.1, 1, 0.25)
    with pytest.raises(ValueError, match="sample_from expects"):
        tune.sample_from(lambda a, b: a)


def test_seeded_generator_repeats_and_np_random_seed_fixes_the_default():
    space = {"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2])}

    def configs(generator):
        return [c for c, _ in _drain(make_trial_source(generator, space, 3, None, None))]

    assert configs(BasicVariantGenerator(random_state=7)) == configs(
        BasicVariantGenerator(random_state=7))
    np.random.seed(11)
    first = configs(None)
    np.random.seed(11)
    assert configs(None) == first
    assert len({c["x"] for c in first}) == 6


def test_constant_grid_search_samples_once_for_the_whole_grid():
    space = {"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2, 3])}
    source = make_trial_source(BasicVariantGenerator(constant_grid_search=True, random_state=0),
                               space, 2, None, None)
    xs = [c["x"] for c, _ in _drain(source)]
    # One value per pass over the grid of three.
    assert xs[0] == xs[1] == xs[2] and xs[3] == xs[4] == xs[5] and xs[0] != xs[3]


def test_points_to_evaluate_come_first_and_count_as_samples():
    space = {"x": tune.uniform(0, 1), "g": tune.grid_search(["a", "b"])}
    generator = BasicVariantGenerator(points_to_evaluate=[{"x": 5.0}], random_state=0)
    source = make_trial_source(generator, space, 3, None, None)
    # The point expands over the grid (2), then two more passes (2 x 2).
    assert source.total() == 6
    got = [c for c, _ in _drain(source)]
    assert [(c["x"], c["g"]) for c in got[:2]] == [(5.0, "a"), (5.0, "b")]
    assert len(got) == 6 and all(0 <= c["x"] <= 1 for c in got[2:])
    with pytest.raises(ValueError, match="does not have"):
        make_trial_source(BasicVariantGenerator(points_to_evaluate=[{"nope": 1}]), space, 1,
                          None, None)


def test_max_concurrent_holds_configs_until_a_trial_completes():
    source = make_trial_source(None, {"x": tune.uniform(0, 1)}, 3, None, None, max_concurrent=1)
    assert source.next_config("a") is not None
    assert source.next_config("b") is None
    source.on_trial_complete("a", {"x": 1})
    assert source.next_config("b") is not None


def test_negative_num_samples_never_finishes():
    source = make_trial_source(None, {"x": tune.uniform(0, 1)}, -1, None, None)
    assert source.total() is None
    assert len(_drain(source, limit=50)) == 50
    assert not source.finished()


def test_state_restores_the_rest_of_the_sequence():
    space = {"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2])}
    source = make_trial_source(BasicVariantGenerator(random_state=3), space, 3, None, None)
    head = [source.next_config(f"t{i}") for i in range(3)]
    state = source.get_state()
    rest = _drain(source)
    restored = make_trial_source(None, {"something": "else"}, 1, None, None)
    restored.set_state(state)
    assert _drain(restored) == rest
    assert len(head) + len(rest) == 6
