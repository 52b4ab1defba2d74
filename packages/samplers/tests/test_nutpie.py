"""kiln_samplers.sample_nutpie on hand-written compiled models (no graphs).

The model is an independent normal, given to nutpie through Python callbacks and
through hand-written C callbacks (Numba cfuncs of DESIGN.md's signatures).
"""

from __future__ import annotations

import _thread
import importlib.metadata
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import carray, cfunc, types

import kiln_samplers as ks
from kiln_samplers import _nutpie as nutpie_adapter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from native_models import LOGP_C  # noqa: E402

pytest.importorskip("nutpie")
compiled_pyfunc = pytest.importorskip("nutpie.compiled_pyfunc")

MU = np.array([1.0, -2.0, 0.5, 10.0])
SD = np.array([1.0, 0.1, 3.0, 20.0])


class Gaussian:
    """An independent normal posterior, in the compiled-model protocol; expand adds a sum."""

    ndim = 4
    out_names = ["x", "total", "positive"]
    dims = {"x": None, "total": None, "positive": None}
    coords: dict = {}

    def __init__(self) -> None:
        self.calls = 0

    def logp_dlogp(self, x):
        self.calls += 1
        z = (x - MU) / SD
        return -0.5 * float(z @ z), -z / SD

    def logp(self, x):
        return self.logp_dlogp(x)[0]

    def expand(self, x):
        return {"x": x.copy(), "total": np.asarray(x.sum()), "positive": x > 0}

    def initial_point(self, seed=None):
        return np.random.default_rng(seed).uniform(-1, 1, self.ndim)


EXPAND_SIG = types.intc(
    types.uintp,
    types.uintp,
    types.CPointer(types.float64),
    types.CPointer(types.float64),
    types.voidptr,
)


@cfunc(LOGP_C)
def _logp_c(n, x_, grad_, logp_, user_data_):  # pragma: no cover (compiled)
    if n != 4:
        return -1
    params = carray(user_data_, (8,), np.float64)  # the data: MU then SD
    x = carray(x_, (4,))
    grad = carray(grad_, (4,))
    total = 0.0
    for i in range(4):
        z = (x[i] - params[i]) / params[4 + i]
        grad[i] = -z / params[4 + i]
        total += z * z
    logp_[0] = -0.5 * total
    return 0


@cfunc(EXPAND_SIG)
def _expand_c(n, n_out, x_, out_, user_data_):  # pragma: no cover (compiled)
    if n != 4 or n_out != 9:
        return -1
    x = carray(x_, (4,))
    out = carray(out_, (9,))
    total = 0.0
    for i in range(4):
        out[i] = x[i]
        total += x[i]
        out[5 + i] = 1.0 if x[i] > 0 else 0.0
    out[4] = total
    return 0


class Pointers:
    """The C callbacks and their data, as kiln_numba.native_c_pointers gives them."""

    def __init__(self) -> None:
        self.data = np.concatenate([MU, SD])
        self.logp_cptr = _logp_c.address
        self.expand_cptr = _expand_c.address
        self.user_data_ptr = self.data.ctypes.data
        self.keep_alive = (self.data, _logp_c, _expand_c)
        self.refreshed = 0

    def refresh(self):
        self.refreshed += 1
        return self.user_data_ptr


def _run(native=None, model=None, **kwargs):
    args = {"draws": 500, "tune": 500, "chains": 2, "random_seed": 1, "progressbar": False}
    return ks.sample_nutpie(model or Gaussian(), native=native, **{**args, **kwargs})


@pytest.mark.parametrize("path", ["python", "pointers"])
def test_draws_the_posterior_in_kilns_layout(path):
    native = Pointers() if path == "pointers" else None
    trace = _run(native)
    assert list(trace.posterior) == ["x", "total", "positive"]
    x = trace.posterior["x"]
    assert x.shape == (2, 500, 4) and x.dtype == np.float64
    assert trace.posterior["total"].shape == (2, 500)
    assert trace.posterior["positive"].dtype == np.bool_  # cast back from float64
    np.testing.assert_array_equal(trace.posterior["positive"], x > 0)
    np.testing.assert_allclose(trace.posterior["total"], x.sum(axis=-1), rtol=1e-12)
    np.testing.assert_array_equal(trace.unconstrained, x)
    flat = x.reshape(-1, 4)
    assert (np.abs(flat.mean(0) - MU) < 4 * SD / np.sqrt(200)).all()
    np.testing.assert_allclose(flat.std(0), SD, rtol=0.2)
    assert set(ks.STAT_NAMES) <= set(trace.sample_stats)
    stats = trace.sample_stats
    assert stats["diverging"].dtype == np.bool_ and stats["tree_depth"].dtype == np.int64
    assert all(v.shape == (2, 500) for v in stats.values())
    assert (stats["n_steps"] >= 1).all() and (stats["step_size"] > 0).all()
    np.testing.assert_allclose(
        stats["lp"], -0.5 * (((x - MU) / SD) ** 2).sum(-1), rtol=1e-10, atol=1e-10
    )
    assert trace.tuning_steps == 500 and not trace.interrupted and trace.sampling_time > 0
    if native is not None:
        assert native.refreshed == 1


@pytest.mark.parametrize("path", ["python", "pointers"])
def test_the_same_seed_gives_the_same_draws(path):
    native = Pointers() if path == "pointers" else None
    a = _run(native, random_seed=5, cores=1)
    b = _run(native, random_seed=5, cores=2)
    c = _run(native, random_seed=6)
    np.testing.assert_array_equal(a.posterior["x"], b.posterior["x"])
    assert not np.array_equal(a.posterior["x"], c.posterior["x"])


def test_both_paths_agree():
    """The same model through Python and through C: the same chains (to rounding)."""
    a = _run(None, random_seed=3)
    b = _run(Pointers(), random_seed=3)
    np.testing.assert_allclose(a.posterior["x"], b.posterior["x"], rtol=1e-8, atol=1e-8)


class Raising(Gaussian):
    """Raises, or is not finite, outside a box: nutpie must reject those points, not panic."""

    def logp_dlogp(self, x):
        if x[0] > 2.5:
            raise ValueError("outside the support")
        if x[0] < -0.5:
            return -np.inf, np.full(4, np.nan)
        lp, grad = super().logp_dlogp(x)
        return lp, grad.astype(np.float32)[::-1][::-1]  # float32, as a careless model might


def test_python_path_turns_errors_and_bad_values_into_rejections():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = _run(model=Raising())
    x0 = trace.posterior["x"][..., 0]
    assert (x0 <= 2.5).all() and (x0 >= -0.5).all()


class FailsAtStart(Gaussian):
    def logp_dlogp(self, x):
        raise ZeroDivisionError("the model is broken")


def test_a_model_that_fails_at_its_initial_point_raises_its_own_error():
    with pytest.raises(ZeroDivisionError, match="broken"):
        _run(model=FailsAtStart())


class Interrupts(Gaussian):
    """Sends Ctrl-C to the main thread after some log-density calls."""

    def logp_dlogp(self, x):
        if self.calls == 20000:
            _thread.interrupt_main()
        return super().logp_dlogp(x)


def test_ctrl_c_returns_the_draws_made_so_far():
    with pytest.warns(ks.SamplingInterrupted, match="interrupted"):
        trace = _run(model=Interrupts(), draws=5000, tune=200, chains=2, cores=2)
    assert trace.interrupted
    n = trace.posterior["x"].shape[1]
    assert 0 < n < 5000
    assert trace.unconstrained.shape == (2, n, 4)
    assert all(v.shape == (2, n) for v in trace.sample_stats.values())


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"bogus": 1, "maxdepth": 12, "nope": 2}, ValueError, r"unknown keys \['bogus', 'nope'\]"),
        ({"draws": 10}, ValueError, r"kl.sample's own arguments.*draws -> kl.sample\(draws"),
        ({"target_accept": 0.9}, ValueError, "target_accept"),
        ({"return_raw_trace": False}, ValueError, "cannot be given"),
        ({"adaptation": "flow"}, ValueError, "adaptation='flow' is not supported"),
        ({"maxdepth": "deep"}, TypeError, "maxdepth"),
        ({"mass_matrix_gamma": 1.0}, ValueError, "nutpie refuses mass_matrix_gamma"),
        ({"max_treedepth": 5, "maxdepth": 6}, ValueError, "not both"),
    ],
)
def test_bad_options_are_clear_errors(options, error, match):
    with pytest.raises(error, match=match):
        ks.nutpie_options(options)


def test_options_are_passed_to_nutpie():
    sample_kwargs, settings = ks.nutpie_options(
        {"max_treedepth": 3, "adaptation": "low_rank", "mass_matrix_gamma": 1e-4}
    )
    assert sample_kwargs == {"adaptation": "low_rank"}
    assert settings == {"maxdepth": 3, "mass_matrix_gamma": 1e-4}
    trace = _run(Pointers(), options={"maxdepth": 2})
    assert trace.sample_stats["tree_depth"].max() <= 2
    assert trace.sample_stats["reached_max_treedepth"].any()


def test_bad_counts_are_clear_errors():
    with pytest.raises(ValueError, match="draws"):
        _run(draws=0)
    with pytest.raises(ValueError, match="target_accept"):
        _run(target_accept=1.5)


def test_an_unsupported_nutpie_version_warns_once_and_samples_through_the_public_api(
    monkeypatch,
):
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.17.3" if name == "nutpie" else real(name)
    )
    monkeypatch.setattr(nutpie_adapter, "_warned_versions", set())
    used = []
    real_from_pyfunc = compiled_pyfunc.from_pyfunc
    monkeypatch.setattr(
        compiled_pyfunc,
        "from_pyfunc",
        lambda *a, **k: used.append(1) or real_from_pyfunc(*a, **k),
    )
    with pytest.warns(ks.NutpieVersionWarning, match=r"nutpie 0.17.3 is installed") as caught:
        trace = _run(native=Pointers(), options={"maxdepth": 8})  # pointers unused: Python
        _run(draws=50, tune=50)
    assert len([w for w in caught if w.category is ks.NutpieVersionWarning]) == 1
    assert used == [1, 1]  # nutpie's public model builder ran, for both
    x = trace.posterior["x"].reshape(-1, 4)
    assert (np.abs(x.mean(0) - MU) < 4 * SD / np.sqrt(200)).all()
    np.testing.assert_allclose(x.std(0), SD, rtol=0.2)
    assert (trace.sample_stats["tree_depth"] <= 8).all()
    np.testing.assert_allclose(
        trace.sample_stats["lp"], -0.5 * (((trace.posterior["x"] - MU) / SD) ** 2).sum(-1),
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip
