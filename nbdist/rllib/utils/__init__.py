"""``ray.rllib.utils``: ``test_utils`` (the example scripts' helpers) and the metric names."""
