"""The user API, like ``numpy.random``: ``rng(seed)`` and one function per distribution.

``kiln.random.normal(mu, sigma, size=None, rng=r)`` returns a symbolic draw from ``r``, a
shared generator (``kiln.random.rng(seed)``) or a generator state of the graph (the
``next_rng`` output of another draw: the graph is then pure). ``kiln.function`` chains
the draws of a function from one shared generator and advances it after each call
(:func:`kiln_compile.thread_generators`), so they are independent, as successive calls
of a NumPy generator are, and calls give new draws. Identical draw expressions are one
node, hence one draw: ask for ``size=2`` to get two.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from kiln_graph import KilnTypeError, RandomGeneratorType, SharedVariable, TensorVariable, Variable
from kiln_graph.tensor import shared
from kiln_random import _continuous as c
from kiln_random import _discrete as d
from kiln_random import _multivariate as m
from kiln_random._op import RandomVariable

_default: list[SharedVariable] = []


def rng(seed: Any = None, name: str | None = None) -> SharedVariable:
    """Return a shared random generator seeded with ``seed`` (NumPy's ``default_rng``).

    Examples
    --------
    >>> r = rng(42)
    >>> x = normal(0.0, 1.0, size=3, rng=r)
    """
    if isinstance(seed, Variable):
        raise KilnTypeError(f"seed: expected an int, a SeedSequence or None, got {seed!r}")
    generator = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return shared(generator, name=name or "rng")


def default_rng() -> SharedVariable:
    """Return the process's default shared generator (used when ``rng`` is not given)."""
    if not _default:
        _default.append(rng(None, name="default_rng"))
    return _default[0]


def draw(op: RandomVariable, params: tuple[Any, ...], size: Any = None, rng: Any = None) -> Any:
    """Return the draw of ``op`` with ``params`` and ``size`` from ``rng`` (see module docs)."""
    if rng is None:
        rng = default_rng()
    if isinstance(rng, np.random.Generator):
        raise KilnTypeError(
            f"{op.name}: rng must be a kiln generator variable; wrap the NumPy generator "
            "with kiln.random.rng(generator)"
        )
    if not isinstance(rng, Variable) or not isinstance(rng.type, RandomGeneratorType):
        raise KilnTypeError(
            f"{op.name}: rng must be a random generator variable (kiln.random.rng(seed)), "
            f"got {rng!r}"
        )
    return op.make_node(rng, size, *params).outputs[1]


def _function(op: RandomVariable, defaults: dict[str, Any], doc: str) -> Callable[..., Any]:
    """Return the user function drawing from ``op``: ``f(*params, size=None, rng=None)``."""

    def f(*args: Any, size: Any = None, rng: Any = None, **kwargs: Any) -> TensorVariable:
        bound = signature.bind(*args, size=size, rng=rng, **kwargs)
        bound.apply_defaults()
        values = tuple(bound.arguments[p] for p in op.params)
        missing = [
            p for p, v in zip(op.params, values, strict=True) if v is inspect.Parameter.empty
        ]
        if missing:
            raise KilnTypeError(f"{op.name}: missing parameter(s) {missing}")
        return draw(op, values, size, rng)

    parameters = [
        inspect.Parameter(
            p,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=defaults.get(p, inspect.Parameter.empty),
        )
        for p in op.params
    ] + [
        inspect.Parameter("size", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter("rng", inspect.Parameter.KEYWORD_ONLY, default=None),
    ]
    signature = inspect.Signature(parameters)
    f.__signature__ = signature  # type: ignore[attr-defined]
    f.__name__ = f.__qualname__ = op.name
    f.__doc__ = (
        f"Draw from {doc} (signature ``{op.signature}``, dtype {op.dtype}).\n\n"
        "``size`` is NumPy's: the batch shape of the draw (``None``: the broadcast of the\n"
        "parameters' batch shapes). ``rng`` is a generator from :func:`rng` (default: the\n"
        "process's default generator) or a generator state of the graph.\n"
    )
    return f


#: One instance per distribution: the Op used by the functions below.
OPS: dict[str, RandomVariable] = {
    op.name: op
    for op in (
        c.NormalRV(),
        c.HalfNormalRV(),
        c.LogNormalRV(),
        c.UniformRV(),
        c.ExponentialRV(),
        c.GammaRV(),
        c.BetaRV(),
        c.InverseGammaRV(),
        c.StudentTRV(),
        c.HalfStudentTRV(),
        c.CauchyRV(),
        c.HalfCauchyRV(),
        c.LaplaceRV(),
        c.LogisticRV(),
        c.WeibullRV(),
        c.TruncatedNormalRV(),
        c.VonMisesRV(),
        d.BernoulliRV(),
        d.BinomialRV(),
        d.PoissonRV(),
        d.NegativeBinomialRV(),
        d.GeometricRV(),
        d.CategoricalRV(),
        d.HyperGeometricRV(),
        m.DirichletRV(),
        m.MultinomialRV(),
        m.MultivariateNormalRV(),
    )
}

normal = _function(OPS["normal"], {"mu": 0.0, "sigma": 1.0}, "a normal distribution")
halfnormal = _function(OPS["halfnormal"], {"sigma": 1.0}, "a half-normal distribution")
lognormal = _function(OPS["lognormal"], {"mu": 0.0, "sigma": 1.0}, "a log-normal distribution")
uniform = _function(OPS["uniform"], {"lower": 0.0, "upper": 1.0}, "a uniform distribution")
exponential = _function(
    OPS["exponential"], {"scale": 1.0}, "an exponential distribution (mean scale)"
)
gamma = _function(OPS["gamma"], {"scale": 1.0}, "a gamma distribution (shape, scale)")
beta = _function(OPS["beta"], {}, "a beta distribution")
invgamma = _function(OPS["invgamma"], {"beta": 1.0}, "an inverse-gamma distribution")
studentt = _function(OPS["studentt"], {"mu": 0.0, "sigma": 1.0}, "a Student t distribution")
halfstudentt = _function(OPS["halfstudentt"], {"sigma": 1.0}, "a half Student t distribution")
cauchy = _function(OPS["cauchy"], {"alpha": 0.0, "beta": 1.0}, "a Cauchy distribution")
halfcauchy = _function(OPS["halfcauchy"], {"beta": 1.0}, "a half-Cauchy distribution")
laplace = _function(OPS["laplace"], {"mu": 0.0, "b": 1.0}, "a Laplace distribution")
logistic = _function(OPS["logistic"], {"mu": 0.0, "s": 1.0}, "a logistic distribution")
weibull = _function(
    OPS["weibull"], {"beta": 1.0}, "a Weibull distribution (shape alpha, scale beta)"
)
truncated_normal = _function(
    OPS["truncated_normal"],
    {"mu": 0.0, "sigma": 1.0, "lower": -np.inf, "upper": np.inf},
    "a truncated normal distribution",
)
vonmises = _function(OPS["vonmises"], {}, "a von Mises distribution on [-pi, pi]")
hypergeometric = _function(
    OPS["hypergeometric"], {}, "a hypergeometric distribution (N items, k successes, n draws)"
)
bernoulli = _function(OPS["bernoulli"], {}, "a Bernoulli distribution")
binomial = _function(OPS["binomial"], {}, "a binomial distribution")
poisson = _function(OPS["poisson"], {}, "a Poisson distribution")
negative_binomial = _function(
    OPS["negative_binomial"], {}, "a negative binomial distribution (NumPy's n, p)"
)
geometric = _function(
    OPS["geometric"], {}, "a geometric distribution (trials to the first success)"
)
categorical = _function(
    OPS["categorical"], {}, "a categorical distribution over the last axis of p"
)
dirichlet = _function(OPS["dirichlet"], {}, "a Dirichlet distribution")
multinomial = _function(OPS["multinomial"], {}, "a multinomial distribution")
multivariate_normal = _function(
    OPS["multivariate_normal"], {}, "a multivariate normal distribution"
)
