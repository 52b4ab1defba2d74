"""kiln_graph.helpers: rarer full collections (long_lived_objects), collect_and_freeze."""

from __future__ import annotations

import gc
import threading

import pytest

from kiln_graph._collection import FULL_COLLECTION_THRESHOLD
from kiln_graph.helpers import collect_and_freeze, long_lived_objects


@pytest.fixture(autouse=True)
def _default_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_the_third_threshold_is_raised_inside_and_restored_after() -> None:
    with long_lived_objects():
        assert gc.get_threshold() == (700, 10, FULL_COLLECTION_THRESHOLD)
        with long_lived_objects():  # re-entrant
            assert gc.get_threshold()[2] == FULL_COLLECTION_THRESHOLD
        assert gc.get_threshold()[2] == FULL_COLLECTION_THRESHOLD
    assert gc.get_threshold() == (700, 10, 10)


def test_an_exception_restores_and_a_higher_threshold_is_kept() -> None:
    with pytest.raises(ValueError), long_lived_objects():
        raise ValueError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    gc.set_threshold(500, 5, 1000)
    with long_lived_objects():
        assert gc.get_threshold() == (500, 5, 1000)
    assert gc.get_threshold() == (500, 5, 1000)


def test_a_change_made_inside_the_block_is_kept() -> None:
    with long_lived_objects():
        gc.set_threshold(700, 10, 7)
    assert gc.get_threshold() == (700, 10, 7)


def test_threads_restore_when_the_last_one_leaves() -> None:
    inside = threading.Barrier(2)
    first_left = threading.Event()
    seen: list[int] = []

    def first() -> None:
        with long_lived_objects():
            inside.wait()
        first_left.set()

    def second() -> None:
        with long_lived_objects():
            inside.wait()
            first_left.wait()
            seen.append(gc.get_threshold()[2])

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [FULL_COLLECTION_THRESHOLD]
    assert gc.get_threshold() == (700, 10, 10)


def test_decorated_functions_run_inside() -> None:
    @long_lived_objects()
    def third_threshold() -> int:
        return gc.get_threshold()[2]

    assert third_threshold() == FULL_COLLECTION_THRESHOLD
    assert third_threshold() == FULL_COLLECTION_THRESHOLD
    assert gc.get_threshold()[2] == 10


def test_collect_and_freeze_finalizes_the_garbage_and_freezes_the_rest() -> None:
    finalized: list[bool] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            finalized.append(True)

    before = gc.get_freeze_count()
    gc.disable()
    try:
        Cycle()
        collect_and_freeze()
        assert finalized == [True]
        assert gc.get_freeze_count() > before + 1000
    finally:
        gc.unfreeze()
        gc.enable()
