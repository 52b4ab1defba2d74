"""kiln_model: models, distributions with their log-densities, transforms, Data.

Examples
--------
>>> import kiln_model as km
>>> with km.Model(coords={"school": list("ABCDEFGH")}) as m:
...     mu = km.Normal("mu", 0, 5)
...     tau = km.HalfCauchy("tau", 5)
...     z = km.Normal("z", 0, 1, dims="school")
...     theta = km.Deterministic("theta", mu + tau * z, dims="school")
"""

from kiln_model import _transforms as transforms  # noqa: F401  (kiln_model.transforms)
from kiln_model import gp as gp  # Gaussian processes (kiln_model.gp)
from kiln_model._autoregressive import AR as AR
from kiln_model._autoregressive import GARCH11 as GARCH11
from kiln_model._censored import Censored as Censored
from kiln_model._compiled import Block as Block
from kiln_model._compiled import CompiledModel as CompiledModel
from kiln_model._continuous import Beta as Beta
from kiln_model._continuous import Cauchy as Cauchy
from kiln_model._continuous import Exponential as Exponential
from kiln_model._continuous import Flat as Flat
from kiln_model._continuous import Gamma as Gamma
from kiln_model._continuous import HalfCauchy as HalfCauchy
from kiln_model._continuous import HalfFlat as HalfFlat
from kiln_model._continuous import HalfNormal as HalfNormal
from kiln_model._continuous import HalfStudentT as HalfStudentT
from kiln_model._continuous import InverseGamma as InverseGamma
from kiln_model._continuous import Laplace as Laplace
from kiln_model._continuous import Logistic as Logistic
from kiln_model._continuous import LogNormal as LogNormal
from kiln_model._continuous import Lognormal as Lognormal
from kiln_model._continuous import Normal as Normal
from kiln_model._continuous import StudentT as StudentT
from kiln_model._continuous import TruncatedNormal as TruncatedNormal
from kiln_model._continuous import Uniform as Uniform
from kiln_model._continuous import Weibull as Weibull
from kiln_model._continuous_derived import ChiSquared as ChiSquared
from kiln_model._continuous_derived import ExGaussian as ExGaussian
from kiln_model._continuous_derived import Gumbel as Gumbel
from kiln_model._continuous_derived import Kumaraswamy as Kumaraswamy
from kiln_model._continuous_derived import Moyal as Moyal
from kiln_model._continuous_derived import Pareto as Pareto
from kiln_model._continuous_derived import PolyaGamma as PolyaGamma
from kiln_model._continuous_derived import SkewNormal as SkewNormal
from kiln_model._continuous_more import AsymmetricLaplace as AsymmetricLaplace
from kiln_model._continuous_more import Interpolated as Interpolated
from kiln_model._continuous_more import LogitNormal as LogitNormal
from kiln_model._continuous_more import Rice as Rice
from kiln_model._continuous_more import SkewStudentT as SkewStudentT
from kiln_model._continuous_more import Triangular as Triangular
from kiln_model._continuous_more import VonMises as VonMises
from kiln_model._continuous_more import Wald as Wald
from kiln_model._custom import CustomDist as CustomDist
from kiln_model._discrete import Bernoulli as Bernoulli
from kiln_model._discrete import Binomial as Binomial
from kiln_model._discrete import Categorical as Categorical
from kiln_model._discrete import Geometric as Geometric
from kiln_model._discrete import NegativeBinomial as NegativeBinomial
from kiln_model._discrete import Poisson as Poisson
from kiln_model._discrete_derived import BetaBinomial as BetaBinomial
from kiln_model._discrete_derived import DiracDelta as DiracDelta
from kiln_model._discrete_derived import DiscreteUniform as DiscreteUniform
from kiln_model._discrete_derived import DiscreteWeibull as DiscreteWeibull
from kiln_model._discrete_derived import HurdleGamma as HurdleGamma
from kiln_model._discrete_derived import HurdleLogNormal as HurdleLogNormal
from kiln_model._discrete_derived import HurdleNegativeBinomial as HurdleNegativeBinomial
from kiln_model._discrete_derived import HurdlePoisson as HurdlePoisson
from kiln_model._discrete_derived import HyperGeometric as HyperGeometric
from kiln_model._discrete_derived import OrderedLogistic as OrderedLogistic
from kiln_model._discrete_derived import OrderedProbit as OrderedProbit
from kiln_model._discrete_derived import ZeroInflatedBinomial as ZeroInflatedBinomial
from kiln_model._discrete_derived import (
    ZeroInflatedNegativeBinomial as ZeroInflatedNegativeBinomial,
)
from kiln_model._discrete_derived import ZeroInflatedPoisson as ZeroInflatedPoisson
from kiln_model._distribution import Distribution as Distribution
from kiln_model._distribution import icdf as icdf
from kiln_model._distribution import logcdf as logcdf
from kiln_model._distribution import logp as logp
from kiln_model._errors import ModelError as ModelError
from kiln_model._imputation import ImputationWarning as ImputationWarning
from kiln_model._lkj import LKJCholeskyCov as LKJCholeskyCov
from kiln_model._lkj import LKJCorr as LKJCorr
from kiln_model._mixture import Mixture as Mixture
from kiln_model._mixture import NormalMixture as NormalMixture
from kiln_model._model import Data as Data
from kiln_model._model import Deterministic as Deterministic
from kiln_model._model import Model as Model
from kiln_model._model import Potential as Potential
from kiln_model._model import VariableInfo as VariableInfo
from kiln_model._model import freeze_dims_and_data as freeze_dims_and_data
from kiln_model._model import modelcontext as modelcontext
from kiln_model._model import set_data as set_data
from kiln_model._multivariate import Dirichlet as Dirichlet
from kiln_model._multivariate import Multinomial as Multinomial
from kiln_model._multivariate import MvNormal as MvNormal
from kiln_model._multivariate_derived import DirichletMultinomial as DirichletMultinomial
from kiln_model._multivariate_derived import MvStudentT as MvStudentT
from kiln_model._multivariate_derived import OrderedMultinomial as OrderedMultinomial
from kiln_model._multivariate_derived import StickBreakingWeights as StickBreakingWeights
from kiln_model._multivariate_derived import ZeroSumNormal as ZeroSumNormal
from kiln_model._multivariate_matrix import CAR as CAR
from kiln_model._multivariate_matrix import ICAR as ICAR
from kiln_model._multivariate_matrix import KroneckerNormal as KroneckerNormal
from kiln_model._multivariate_matrix import MatrixNormal as MatrixNormal
from kiln_model._multivariate_matrix import Wishart as Wishart
from kiln_model._multivariate_matrix import WishartBartlett as WishartBartlett
from kiln_model._package import ModelPackage as ModelPackage
from kiln_model._package import PackagedModel as PackagedModel
from kiln_model._package import VersionMismatchError as VersionMismatchError
from kiln_model._package import check_versions as check_versions
from kiln_model._package import environment_versions as environment_versions
from kiln_model._package import load_package as load_package
from kiln_model._sde import EulerMaruyama as EulerMaruyama
from kiln_model._triangular import expand_packed_triangular as expand_packed_triangular
from kiln_model._truncated import Truncated as Truncated
from kiln_model._validate import check_initial_point as check_initial_point
from kiln_model._walks import GaussianRandomWalk as GaussianRandomWalk
from kiln_model._walks import MvGaussianRandomWalk as MvGaussianRandomWalk
from kiln_model._walks import MvStudentTRandomWalk as MvStudentTRandomWalk
from kiln_model._walks import RandomWalk as RandomWalk
