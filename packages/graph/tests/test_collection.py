"""kiln_graph.helpers: long_lived_objects, freeze_survivors and collect_and_freeze."""

from __future__ import annotations

import gc
import threading

import pytest

from kiln_graph import _collection
from kiln_graph._collection import FULL_COLLECTION_THRESHOLD
from kiln_graph.helpers import collect_and_freeze, freeze_survivors, long_lived_objects


@pytest.fixture(autouse=True)
def _default_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


class Cycle:
    """A reference cycle that says when it is finalized."""

    def __init__(self, finalized: list[str], name: str) -> None:
        self.me = self
        self.finalized, self.name = finalized, name

    def __del__(self) -> None:
        self.finalized.append(self.name)


def is_frozen(obj: object) -> bool:
    """Whether ``obj`` is in the permanent generation (``gc.get_objects`` leaves it out).

    The tests ask this of their own objects, not of ``gc.get_freeze_count()``: other
    frozen objects may be freed by their reference counts at any moment (a test process
    holds millions), so the count is not exact.
    """
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


@pytest.fixture()
def _no_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_collection, "FREEZE_INTERVAL_S", 0.0)


@pytest.mark.usefixtures("_no_interval")
def test_a_block_freezes_what_is_older_and_what_survives_then_unfreezes_it() -> None:
    gc.unfreeze()  # as after kiln's first block: nothing frozen by anyone else
    finalized: list[str] = []
    with long_lived_objects():
        older = gc.get_freeze_count()
        assert older > 1000  # the objects that existed when the block began
        Cycle(finalized, "garbage")
        kept = [[i] for i in range(2000)]
        assert not is_frozen(kept[0])
        with long_lived_objects():
            freeze_survivors()
        assert finalized == ["garbage"]  # collected before the survivors were frozen
        assert is_frozen(kept[0]) and is_frozen(kept[-1])
    assert gc.get_freeze_count() == 0  # all unfrozen: collected as usual from now on
    assert not is_frozen(kept[0]) and any(o is kept[0] for o in gc.get_objects(2))


def test_survivors_are_frozen_at_most_once_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.unfreeze()
    monkeypatch.setattr(_collection, "FREEZE_INTERVAL_S", 3600.0)
    finalized: list[str] = []
    with long_lived_objects():
        gc.disable()
        try:
            Cycle(finalized, "garbage")
            young = [0]
            freeze_survivors()  # too soon after the block began
            assert finalized == []
            assert not is_frozen(young)
        finally:
            gc.enable()
    gc.collect()
    assert finalized == ["garbage"]


@pytest.mark.usefixtures("_no_interval")
def test_objects_frozen_by_someone_else_are_left_alone() -> None:
    finalized: list[str] = []
    try:
        with long_lived_objects():
            pass
        assert gc.get_freeze_count() == 0
        mine = [[i] for i in range(100)]
        gc.freeze()  # a user's (a server before it forks)
        assert is_frozen(mine[0])
        with long_lived_objects():
            Cycle(finalized, "garbage")
            young = [0]
            freeze_survivors()
            assert not is_frozen(young)  # kiln froze nothing
        assert is_frozen(mine[0]) and is_frozen(mine[-1])  # and unfroze nothing
        assert finalized == []  # freeze_survivors did nothing
    finally:
        gc.unfreeze()
        gc.collect()
    assert finalized == ["garbage"]


@pytest.mark.usefixtures("_no_interval")
def test_what_is_frozen_after_every_block_ended_is_unfrozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.unfreeze()
    entered, leave, left = threading.Event(), threading.Event(), threading.Event()

    def other_thread() -> None:
        with long_lived_objects():
            entered.set()
            leave.wait()
        left.set()

    collect = gc.collect

    def collect_while_the_block_ends() -> int:
        leave.set()
        left.wait()
        return collect()

    thread = threading.Thread(target=other_thread)
    thread.start()
    entered.wait()
    monkeypatch.setattr(gc, "collect", collect_while_the_block_ends)
    freeze_survivors()  # in a block's time, not in the block: its end comes first
    monkeypatch.undo()
    thread.join()
    assert gc.get_freeze_count() == 0


@pytest.mark.usefixtures("_no_interval")
def test_freeze_survivors_does_nothing_outside_a_block() -> None:
    gc.unfreeze()
    finalized: list[str] = []
    gc.disable()
    try:
        Cycle(finalized, "garbage")
        freeze_survivors()
        assert gc.get_freeze_count() == 0
        assert finalized == []
    finally:
        gc.enable()
        gc.collect()
    assert finalized == ["garbage"]


def test_the_interpreters_own_frozen_objects_count_as_nobody_elses() -> None:
    gc.unfreeze()
    gc.collect()  # CPython 3.12 moves its immortal tuples to the permanent generation
    assert gc.get_freeze_count() <= _collection._INTERPRETERS_FROZEN
    with long_lived_objects():
        assert _collection._froze  # it froze, and so unfreezes at the end
    assert gc.get_freeze_count() == 0
    with long_lived_objects():
        assert _collection._froze  # again: nothing is frozen but the interpreter's


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
    finalized: list[str] = []
    before = gc.get_freeze_count()
    gc.disable()
    try:
        Cycle(finalized, "garbage")
        collect_and_freeze()
        assert finalized == ["garbage"]
        assert gc.get_freeze_count() > before + 1000
    finally:
        gc.unfreeze()
        gc.enable()
