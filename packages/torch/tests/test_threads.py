"""``config.torch_threads``: the thread count of a call, decided per graph, restored after."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kiln_compile
from kiln_compile import Config, Mode, function
from kiln_graph import KilnValueError
from kiln_graph import tensor as kt
from kiln_torch._linker import PARALLEL_ELEMENTS

TORCH = Mode(linker="torch")


@pytest.fixture
def thread_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record every ``torch.set_num_threads`` call (torch still applies it)."""
    calls: list[int] = []
    real = torch.set_num_threads

    def recording(n: int) -> None:
        calls.append(n)
        real(n)

    before = torch.get_num_threads()
    real(2)  # torch's count here: two, as on the 2-core CI machine
    monkeypatch.setattr(torch, "set_num_threads", recording)
    yield calls
    real(before)


def test_a_graph_of_small_arrays_runs_on_one_thread_and_restores_torchs_count(
    thread_calls: list[int],
):
    x = kt.vector("x")
    f = function([x], kt.exp(x).sum(), TORCH)
    value = np.linspace(0.0, 1.0, 100)
    assert f(value) == pytest.approx(np.exp(value).sum(), rel=1e-14)
    assert thread_calls == [1, 2]
    assert torch.get_num_threads() == 2


def test_a_large_input_keeps_torchs_own_thread_count(thread_calls: list[int]):
    x = kt.vector("x")
    f = function([x], kt.exp(x).sum(), TORCH)
    value = np.full(PARALLEL_ELEMENTS, 1e-3)
    assert f(value) == pytest.approx(np.exp(value).sum(), rel=1e-12)
    assert thread_calls == []
    f(value[:10])  # the same function on a small input: one thread
    assert thread_calls == [1, 2]


def test_a_large_constant_keeps_torchs_own_thread_count(thread_calls: list[int]):
    x = kt.scalar("x")
    data = np.linspace(0.0, 1.0, PARALLEL_ELEMENTS)
    f = function([x], kt.exp(kt.constant(data) * x).sum(), TORCH)
    assert f(0.5) == pytest.approx(np.exp(0.5 * data).sum(), rel=1e-12)
    assert thread_calls == []


def test_an_explicit_count_is_set_around_each_call(thread_calls: list[int]):
    x = kt.vector("x")
    f = function([x], kt.exp(x).sum(), TORCH)
    with kiln_compile.config.change(torch_threads=3):
        f(np.ones(3))
    assert thread_calls == [3, 2]
    with kiln_compile.config.change(torch_threads=2):
        f(np.ones(3))  # already torch's count: nothing to set
    assert thread_calls == [3, 2]


def test_the_count_is_restored_when_the_call_fails(thread_calls: list[int]):
    x = kt.matrix("x")
    f = function([x], kt.dot(x, x).sum(), TORCH)
    with pytest.raises(RuntimeError):
        f(np.ones((2, 3)))
    assert thread_calls == [1, 2]
    assert torch.get_num_threads() == 2


def test_a_bad_setting_is_a_clear_error():
    assert Config.from_flags("torch_threads=4").torch_threads == 4
    with pytest.raises(KilnValueError, match="torch_threads: expected an integer, got 'many'"):
        Config.from_flags("torch_threads=many")
    x = kt.vector("x")
    f = function([x], kt.exp(x).sum(), TORCH)
    with (
        kiln_compile.config.change(torch_threads=-1),
        pytest.raises(KilnValueError, match="torch_threads: expected an integer >= 0"),
    ):
        f(np.ones(3))
