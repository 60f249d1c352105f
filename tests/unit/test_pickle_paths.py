"""A function or class that does not pickle is refused with the path to what does not (the
message `.remote()` raises comes from `check_picklable`)."""

from __future__ import annotations

import threading

import pytest

from nbdist.exceptions import SerializationError
from nbdist.wire.pickle_paths import culprits
from nbdist.wire.serialization import check_picklable


def test_the_path_to_a_captured_lock_is_named() -> None:
    # Defined here, so cloudpickle pickles them by value (as a notebook's functions).
    lock = threading.Lock()

    def helper() -> int:
        with lock:
            return 1

    def uses_helper() -> int:
        return helper()

    class Holder:
        def method(self) -> int:
            return uses_helper()

    with pytest.raises(SerializationError) as info:
        check_picklable(uses_helper, "remote function 'uses_helper'")
    assert "because of uses_helper -> helper -> lock (lock: cannot pickle" in str(info.value)
    with pytest.raises(SerializationError) as info:
        check_picklable(Holder, "actor class 'Holder'")
    assert "Holder -> method -> uses_helper -> helper -> lock" in str(info.value)


def test_a_value_that_pickles_has_no_culprit_and_a_closure_is_walked() -> None:
    assert culprits("text", "name") == []
    held = threading.Lock()

    def closure() -> bool:
        return held.locked()

    path, obj, _ = culprits(closure, "closure")[0]
    assert path == "closure -> held" and obj is held
