"""kiln_random: random-variable Ops and the ``kiln.random`` API (like ``numpy.random``).

Random variables are pure Ops ``(rng, size, *params) -> (next_rng, draw)``, declared by
a gufunc signature (see :class:`RandomVariable`). ``rng(seed)`` makes a shared
generator; each distribution function returns a draw from it. ``kiln.function`` chains
a function's draws from one shared generator and advances it after each call.

Examples
--------
>>> import kiln_random as kr
>>> r = kr.rng(42)
>>> x = kr.normal(0.0, 1.0, size=(2, 3), rng=r)
"""

from kiln_random._api import OPS as OPS
from kiln_random._api import bernoulli as bernoulli
from kiln_random._api import beta as beta
from kiln_random._api import binomial as binomial
from kiln_random._api import categorical as categorical
from kiln_random._api import cauchy as cauchy
from kiln_random._api import default_rng as default_rng
from kiln_random._api import dirichlet as dirichlet
from kiln_random._api import draw as draw
from kiln_random._api import exponential as exponential
from kiln_random._api import gamma as gamma
from kiln_random._api import geometric as geometric
from kiln_random._api import halfcauchy as halfcauchy
from kiln_random._api import halfnormal as halfnormal
from kiln_random._api import halfstudentt as halfstudentt
from kiln_random._api import hypergeometric as hypergeometric
from kiln_random._api import invgamma as invgamma
from kiln_random._api import laplace as laplace
from kiln_random._api import logistic as logistic
from kiln_random._api import lognormal as lognormal
from kiln_random._api import multinomial as multinomial
from kiln_random._api import multivariate_normal as multivariate_normal
from kiln_random._api import negative_binomial as negative_binomial
from kiln_random._api import normal as normal
from kiln_random._api import poisson as poisson
from kiln_random._api import rng as rng
from kiln_random._api import studentt as studentt
from kiln_random._api import truncated_normal as truncated_normal
from kiln_random._api import uniform as uniform
from kiln_random._api import vonmises as vonmises
from kiln_random._api import weibull as weibull
from kiln_random._continuous import BetaRV as BetaRV
from kiln_random._continuous import CauchyRV as CauchyRV
from kiln_random._continuous import ExponentialRV as ExponentialRV
from kiln_random._continuous import GammaRV as GammaRV
from kiln_random._continuous import HalfCauchyRV as HalfCauchyRV
from kiln_random._continuous import HalfNormalRV as HalfNormalRV
from kiln_random._continuous import HalfStudentTRV as HalfStudentTRV
from kiln_random._continuous import InverseGammaRV as InverseGammaRV
from kiln_random._continuous import LaplaceRV as LaplaceRV
from kiln_random._continuous import LogisticRV as LogisticRV
from kiln_random._continuous import LogNormalRV as LogNormalRV
from kiln_random._continuous import NormalRV as NormalRV
from kiln_random._continuous import StudentTRV as StudentTRV
from kiln_random._continuous import TruncatedNormalRV as TruncatedNormalRV
from kiln_random._continuous import UniformRV as UniformRV
from kiln_random._continuous import VonMisesRV as VonMisesRV
from kiln_random._continuous import WeibullRV as WeibullRV
from kiln_random._discrete import BernoulliRV as BernoulliRV
from kiln_random._discrete import BinomialRV as BinomialRV
from kiln_random._discrete import CategoricalRV as CategoricalRV
from kiln_random._discrete import GeometricRV as GeometricRV
from kiln_random._discrete import HyperGeometricRV as HyperGeometricRV
from kiln_random._discrete import NegativeBinomialRV as NegativeBinomialRV
from kiln_random._discrete import PoissonRV as PoissonRV
from kiln_random._multivariate import DirichletRV as DirichletRV
from kiln_random._multivariate import MultinomialRV as MultinomialRV
from kiln_random._multivariate import MultivariateNormalRV as MultivariateNormalRV
from kiln_random._op import RandomVariable as RandomVariable
from kiln_random._op import constraint_names as constraint_names
from kiln_random._op import copy_generator as copy_generator
from kiln_random._op import evaluate_constraint as evaluate_constraint
from kiln_random._op import show_value as show_value
