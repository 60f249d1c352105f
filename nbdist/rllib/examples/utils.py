"""``ray.rllib.examples.utils``: the example scripts' helpers (see utils/test_utils.py)."""

from nbdist.rllib.utils.test_utils import (
    add_rllib_example_script_args,
    run_rllib_example_script_experiment,
)

__all__ = ["add_rllib_example_script_args", "run_rllib_example_script_experiment"]
