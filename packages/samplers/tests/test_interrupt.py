"""A stop request ends a Python chain inside its transition, and keeps the draws made."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import kiln_samplers as ks


class Slow:
    """A 3-d normal whose log-density sets ``stop`` at its ``stop_at``-th call."""

    ndim = 3
    out_names = ["x"]
    dims = {"x": None}
    coords: dict = {}

    def __init__(self, stop: threading.Event, stop_at: int) -> None:
        self.stop, self.stop_at, self.calls, self.after = stop, stop_at, 0, 0

    def logp_dlogp(self, x):
        self.calls += 1
        if self.stop.is_set():
            self.after += 1
        if self.calls == self.stop_at:
            self.stop.set()
        return -0.5 * float(x @ x), -x

    def logp(self, x):
        return self.logp_dlogp(x)[0]

    def expand(self, x):
        return {"x": x.copy()}

    def initial_point(self, seed=None):
        return np.random.default_rng(seed).uniform(-1, 1, self.ndim)


@pytest.mark.parametrize(("tune", "warmup_done"), [(0, True), (10**6, False)])
def test_a_stop_ends_a_python_chain_at_its_next_log_density_call(tune, warmup_done):
    stop = threading.Event()
    model = Slow(stop, stop_at=3000)
    settings = ks.NutsSettings()
    state = ks.init_chain(model, 1)
    result = ks.run_chain(model, state, 10**6, tune, settings, stop=stop)
    # The call that set the flag returns; the next one raises: the transition is dropped.
    assert model.after == 0
    assert result.warmup_done is warmup_done
    if warmup_done:
        assert 0 < result.n_done < 3000 and result.draws.shape == (result.n_done, 3)
    else:
        assert result.n_done == 0 and result.draws.shape == (0, 3)
