"""Bad input to kiln's entry points: a named error before anything compiles.

One table of bad arguments to ``kl.sample``, ``kl.sample_prior_predictive`` and
``kl.sample_posterior_predictive``: each case names the exception type and a pattern
the message must match (the argument, and what was expected). Then the missing
optional dependencies (the import made to fail) and the initial points whose
log-density is not finite (the variable named).
"""

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kiln as kl
from kiln_compile import BackendNotInstalledError
from kiln_graph import KilnTypeError, KilnValueError

FAST = {"draws": 5, "tune": 5, "chains": 1, "progressbar": False, "backend": "vm"}


def _model() -> kl.Model:
    with kl.Model() as m:
        mu = kl.Normal("mu", 0, 1)
        kl.Normal("y", mu, 1, observed=[0.1, -0.2])
    return m


def _sample(**kwargs: Any) -> Callable[[], Any]:
    def run() -> Any:
        return kl.sample(model=_model(), **{**FAST, **kwargs})

    return run


def _prior(*args: Any, **kwargs: Any) -> Callable[[], Any]:
    def run() -> Any:
        return kl.sample_prior_predictive(*args, model=_model(), **kwargs)

    return run


class _FakePosterior:
    """Never reached: the arguments are checked before the posterior is read."""

    children: dict[str, Any] = {}


def _posterior(**kwargs: Any) -> Callable[[], Any]:
    def run() -> Any:
        return kl.sample_posterior_predictive(_FakePosterior(), model=_model(), **kwargs)

    return run


def _seed_expected(chains: int) -> str:
    return (
        rf"expected None, a non-negative int, or a list of {chains} non-negative ints "
        r"\(one per chain\)"
    )


SEED = r"^random_seed: " + _seed_expected(1)
PRIOR_SEED = r"^random_seed: expected None, a non-negative int, a np.random.SeedSequence"

CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # --- kl.sample: counts
    ("draws-zero", _sample(draws=0), KilnValueError, r"^draws: expected an int >= 1, got 0"),
    ("draws-negative", _sample(draws=-5), KilnValueError, r"^draws: expected an int >= 1"),
    ("draws-float", _sample(draws=1.5), KilnValueError, r"^draws: .*got 1.5 \(float\)"),
    ("draws-str", _sample(draws="10"), KilnValueError, r"^draws: .*got '10' \(str\)"),
    ("draws-bool", _sample(draws=True), KilnValueError, r"^draws: .*got True \(bool\)"),
    ("tune-negative", _sample(tune=-1), KilnValueError, r"^tune: expected an int >= 0, got -1"),
    ("tune-float", _sample(tune=2.5), KilnValueError, r"^tune: expected an int >= 0"),
    ("chains-zero", _sample(chains=0), KilnValueError, r"^chains: expected an int >= 1, got 0"),
    ("chains-float", _sample(chains=2.0), KilnValueError, r"^chains: .*got 2.0 \(float\)"),
    ("cores-zero", _sample(cores=0), KilnValueError, r"^cores: expected an int >= 1 or None"),
    ("cores-str", _sample(cores="2"), KilnValueError, r"^cores: expected an int >= 1 or None"),
    # --- kl.sample: random_seed
    ("seed-str", _sample(random_seed="abc"), KilnValueError, SEED + r", got 'abc' \(str\)"),
    ("seed-float", _sample(random_seed=1.5), KilnValueError, SEED + r", got 1.5 \(float\)"),
    ("seed-negative", _sample(random_seed=-1), KilnValueError, SEED + r", got -1 \(int\)"),
    ("seed-bool", _sample(random_seed=True), KilnValueError, SEED + r", got True"),
    ("seed-generator", _sample(random_seed=np.random.default_rng(0)), KilnValueError, SEED),
    (
        "seed-list-too-short",
        _sample(random_seed=[1, 2], chains=3),
        KilnValueError,
        r"^random_seed: 2 seeds for 3 chains; " + _seed_expected(3),
    ),
    (
        "seed-list-negative",
        _sample(random_seed=[1, -2], chains=2),
        KilnValueError,
        r"^random_seed: the seeds must be non-negative ints, got -2",
    ),
    (
        "seed-list-str",
        _sample(random_seed=["a"], chains=1),
        KilnValueError,
        r"^random_seed: the seeds must be non-negative ints, got 'a'",
    ),
    # --- kl.sample: options
    (
        "target-accept-one",
        _sample(target_accept=1.0),
        KilnValueError,
        r"^target_accept: expected a number strictly between 0 and 1, got 1.0",
    ),
    (
        "target-accept-zero",
        _sample(target_accept=0),
        KilnValueError,
        r"^target_accept: expected a number strictly between 0 and 1",
    ),
    (
        "target-accept-str",
        _sample(target_accept="0.8"),
        KilnValueError,
        r"^target_accept: .*got '0.8' \(str\)",
    ),
    (
        "init-unknown",
        _sample(init="jitter"),
        KilnValueError,
        r"^init: unknown 'jitter' \(str\); expected one of \['auto', 'jitter\+adapt_diag'",
    ),
    (
        "progressbar-str",
        _sample(progressbar="yes"),
        KilnTypeError,
        r"^progressbar: expected True or False, got 'yes'",
    ),
    (
        "backend-unknown",
        _sample(backend="nope"),
        KilnValueError,
        r"^backend: 'nope' is not an installed backend; valid: \[.*'vm'\]",
    ),
    ("backend-not-str", _sample(backend=3), KilnTypeError, r"^backend: expected a backend name"),
    (
        "backend-not-installed",
        _sample(backend="torch"),
        BackendNotInstalledError,
        r"^backend='torch' is not installed; .*pip install kiln\[torch\]",
    ),
    (
        "nuts-sampler-unknown",
        _sample(nuts_sampler="stan"),
        KilnValueError,
        r"^nuts_sampler: unknown sampler 'stan' \(str\); valid: \['blackjax', 'kiln'",
    ),
    (
        "nuts-sampler-none",
        _sample(nuts_sampler=None),
        KilnValueError,
        r"^nuts_sampler: unknown sampler None",
    ),
    (
        "nuts-kwargs-unknown",
        _sample(nuts_sampler_kwargs={"max_depth": 5}),
        KilnTypeError,
        r"^nuts_sampler_kwargs: .*'max_depth'.*takes \['max_treedepth'",
    ),
    (
        "nuts-kwargs-bad-value",
        _sample(nuts_sampler_kwargs={"max_treedepth": 0}),
        KilnValueError,
        r"^nuts_sampler_kwargs: max_treedepth: expected an int in \[1, 30\]",
    ),
    (
        "nuts-kwargs-bad-adaptation",
        _sample(nuts_sampler_kwargs={"adaptation": "nutpie"}),
        KilnValueError,
        r"^nuts_sampler_kwargs: adaptation: expected one of 'stan', 'grad', got 'nutpie'",
    ),
    (
        "nuts-kwargs-not-dict",
        _sample(nuts_sampler_kwargs=[("max_treedepth", 5)]),
        KilnTypeError,
        r"^nuts_sampler_kwargs: expected a dict of options or None",
    ),
    (
        "idata-kwargs-not-dict",
        _sample(idata_kwargs="log_likelihood"),
        KilnTypeError,
        r"^idata_kwargs: expected a dict of options or None",
    ),
    (
        "idata-kwargs-unknown",
        _sample(idata_kwargs={"loglik": True}),
        KilnTypeError,
        r"^idata_kwargs: unknown keys \['loglik'\]",
    ),
    (
        "compile-kwargs-not-dict",
        _sample(compile_kwargs="FAST_RUN", backend=None),
        KilnTypeError,
        r"^compile_kwargs: expected a dict of options or None",
    ),
    (
        "compile-kwargs-unknown",
        _sample(compile_kwargs={"linker": "vm"}, backend=None),
        KilnTypeError,
        r"^compile_kwargs: unknown keys \['linker'\]",
    ),
    (
        "model-not-a-model",
        lambda: kl.sample(model="m", **FAST),
        KilnTypeError,
        r"^model: expected a kiln Model or None, got 'm'",
    ),
    (
        "step-not-a-step",
        _sample(step="Metropolis"),
        KilnTypeError,
        r"^step: expected a step method",
    ),
    (
        "step-unknown-variable",
        lambda: kl.sample(model=_model(), step=kl.Metropolis(["nope"]), **FAST),
        KilnValueError,
        r"^step: Metropolis was given 'nope', which is not a free variable",
    ),
    # --- sample_prior_predictive
    ("prior-draws-zero", _prior(0), KilnValueError, r"^draws: expected an int >= 1, got 0"),
    ("prior-draws-float", _prior(2.5), KilnValueError, r"^draws: expected an int >= 1"),
    ("prior-seed-str", _prior(10, random_seed="abc"), KilnValueError, PRIOR_SEED),
    ("prior-seed-float", _prior(10, random_seed=1.5), KilnValueError, PRIOR_SEED),
    ("prior-seed-negative", _prior(10, random_seed=-1), KilnValueError, PRIOR_SEED),
    (
        "prior-var-names-int",
        _prior(10, var_names=[1]),
        KilnTypeError,
        r"^var_names: expected a list of variable names \(str\)",
    ),
    (
        "prior-var-names-unknown",
        _prior(10, var_names=["nope"]),
        KilnValueError,
        r"^var_names: \['nope'\] are not free variables",
    ),
    (
        "prior-backend-unknown",
        _prior(10, backend="nope"),
        KilnValueError,
        r"^backend: 'nope' is not an installed backend",
    ),
    (
        "prior-model-not-a-model",
        lambda: kl.sample_prior_predictive(10, model=3),
        KilnTypeError,
        r"^model: expected a kiln Model or None, got 3",
    ),
    # --- sample_posterior_predictive
    ("post-seed-str", _posterior(random_seed="abc"), KilnValueError, PRIOR_SEED),
    ("post-seed-negative", _posterior(random_seed=-3), KilnValueError, PRIOR_SEED),
    (
        "post-predictions-str",
        _posterior(predictions="yes"),
        KilnTypeError,
        r"^predictions: expected True or False, got 'yes'",
    ),
    (
        "post-progressbar-str",
        _posterior(progressbar="no"),
        KilnTypeError,
        r"^progressbar: expected True or False",
    ),
    (
        "post-extend-str",
        _posterior(extend_inferencedata="no"),
        KilnTypeError,
        r"^extend_inferencedata: expected True or False",
    ),
    (
        "post-var-names-int",
        _posterior(var_names=3),
        KilnTypeError,
        r"^var_names: expected a list of variable names",
    ),
    (
        "post-backend-unknown",
        _posterior(backend="nope"),
        KilnValueError,
        r"^backend: 'nope' is not an installed backend",
    ),
    (
        "post-idata-none",
        lambda: kl.sample_posterior_predictive(None, model=_model()),
        KilnTypeError,
        r"^idata: expected an ArviZ DataTree",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [pytest.param(c, e, p, id=i) for i, c, e, p in CASES],
)
def test_bad_argument_is_named(
    call: Callable[[], Any], error: type[Exception], pattern: str
) -> None:
    with pytest.raises(error, match=pattern):
        call()


# --- missing optional dependencies (the import made to fail, nothing else touched) ----------

MISSING: list[tuple[str, dict[str, Any], str]] = [
    ("jax", {"backend": "jax"}, r"^backend='jax' needs the package 'jax'.*pip install kiln\[jax\]"),
    (
        "jax",
        {"nuts_sampler": "numpyro", "backend": None},
        r"^nuts_sampler='numpyro' needs the package 'jax'.*pip install kiln\[numpyro\]",
    ),
    (
        "jax",
        {"nuts_sampler": "blackjax", "backend": None},
        r"^nuts_sampler='blackjax' needs the package 'jax'.*pip install kiln\[blackjax\]",
    ),
    (
        "numpyro",
        {"nuts_sampler": "numpyro", "backend": None},
        r"^nuts_sampler='numpyro' needs the package 'numpyro'.*pip install kiln\[numpyro\]",
    ),
    (
        "nutpie",
        {"nuts_sampler": "nutpie"},
        r"^nuts_sampler='nutpie' needs the package 'nutpie'.*pip install kiln\[nutpie\]",
    ),
]


@pytest.mark.parametrize(
    ("package", "kwargs", "pattern"),
    [pytest.param(p, k, m, id=f"{p}-{next(iter(k.values()))}") for p, k, m in MISSING],
)
def test_missing_dependency_is_named(
    monkeypatch: pytest.MonkeyPatch, package: str, kwargs: dict[str, Any], pattern: str
) -> None:
    # None in sys.modules makes `import package` fail; the check raises before importing.
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(BackendNotInstalledError, match=pattern):
        kl.sample(model=_model(), **{**FAST, **kwargs})


def test_missing_jax_for_the_predictive_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(BackendNotInstalledError, match=r"pip install kiln\[jax\]"):
        kl.sample_prior_predictive(10, model=_model(), backend="jax")


# --- no finite initial point: the variable named -------------------------------------------


def _potential_minus_inf() -> kl.Model:
    with kl.Model() as m:
        x = kl.Normal("x", 0, 1)
        kl.Potential("never", -np.inf * (x * 0 + 1))
    return m


def _observed_outside() -> kl.Model:
    with kl.Model() as m:
        u = kl.Uniform("u", 0, 1)
        kl.Normal("y", 0, u - 2.0, observed=[0.5])  # sigma < 0 wherever u is
    return m


def _discrete_potential() -> kl.Model:
    with kl.Model() as m:
        k = kl.Poisson("k", 3.0)
        kl.Potential("never", -np.inf * (k * 0 + 1))
    return m


START = [
    (
        "potential",
        _potential_minus_inf,
        r"^the log-density is not finite at the initial point: Potential 'never' has log-density "
        r"-inf\. Make the Potential finite where the sampler starts\. The point .*: x=0\.0",
    ),
    (
        "observed-term",
        _observed_outside,
        r"variable 'y' has log-density -inf\. Check the observed data against the "
        r"distribution's support and its parameters",
    ),
    ("steps-potential", _discrete_potential, r"Potential 'never' has log-density -inf"),
]


@pytest.mark.parametrize(("build", "pattern"), [pytest.param(b, p, id=i) for i, b, p in START])
def test_no_finite_start_names_the_term(build: Callable[[], kl.Model], pattern: str) -> None:
    with pytest.raises(kl.ModelError, match=pattern) as info:
        kl.sample(model=build(), **FAST)
    assert "initial point" in str(info.value.__cause__)  # the sampler's own error, chained


def test_the_table_is_long_enough() -> None:
    assert len(CASES) + len(MISSING) + len(START) >= 60
