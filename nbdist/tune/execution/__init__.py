"""Running trials: the controller loop, the trial actors, storage and event records."""
