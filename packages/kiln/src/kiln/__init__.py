"""kiln: a probabilistic-programming stack — models, graph IR, autodiff, rewriter, backends.

A model author needs only ``import kiln as kl``: ``kl.Model``, the distributions
(``kl.Normal``, ...), ``kl.Data``, ``kl.Deterministic``, ``kl.Potential``,
``kl.set_data`` come from :mod:`kiln_model`; ``kl.function``, ``kl.grad`` and
``kl.tensor`` from the compiler packages.

Examples
--------
>>> import kiln
>>> import kiln.tensor as kt
>>> x = kt.vector("x")
>>> f = kiln.function([x], kiln.grad(kt.sum(x**2), x))
>>> f([1.0, 2.0])
array([2., 4.])
"""

from kiln import cache as cache
from kiln import distributions as distributions
from kiln import math as math
from kiln import random as random
from kiln import tensor as tensor
from kiln._distributed import ChainsFailedError as ChainsFailedError
from kiln._draw import draw as draw
from kiln._engine_steps import NUTS as NUTS
from kiln._engine_steps import BinaryMetropolis as BinaryMetropolis
from kiln._engine_steps import CategoricalGibbsMetropolis as CategoricalGibbsMetropolis
from kiln._engine_steps import CompoundStep as CompoundStep
from kiln._engine_steps import DEMetropolis as DEMetropolis
from kiln._engine_steps import DEMetropolisZ as DEMetropolisZ
from kiln._engine_steps import Metropolis as Metropolis
from kiln._engine_steps import Slice as Slice
from kiln._graphviz import model_to_graphviz as model_to_graphviz
from kiln._loglik import compute_deterministics as compute_deterministics
from kiln._loglik import compute_log_likelihood as compute_log_likelihood
from kiln._map import find_MAP as find_MAP
from kiln._predictive import sample_posterior_predictive as sample_posterior_predictive
from kiln._predictive import sample_prior_predictive as sample_prior_predictive
from kiln._sampling import sample as sample
from kiln.distributions import missing_name_error as _missing_name_error
from kiln_compile import FAST_COMPILE as FAST_COMPILE
from kiln_compile import FAST_RUN as FAST_RUN
from kiln_compile import Function as Function
from kiln_compile import Mode as Mode
from kiln_compile import config as config
from kiln_compile import function as function
from kiln_graph import dprint as dprint
from kiln_graph import format_graph as format_graph
from kiln_graph import grad as grad
from kiln_graph import graph_replace as graph_replace
from kiln_graph import hessian as hessian
from kiln_graph import jacobian as jacobian
from kiln_graph.testing import verify_grad as verify_grad
from kiln_model import *  # noqa: F403  (Model, the distributions, Data, ...: see kiln_model)
from kiln_model import gp as gp
from kiln_model import transforms as transforms
from kiln_samplers import SamplingInterrupted as SamplingInterrupted
from kiln_samplers import SamplingWarning as SamplingWarning
from kiln_samplers import SlowPathWarning as SlowPathWarning


def __getattr__(name: str) -> object:
    """Return ``kl.__version__``, read from the installed metadata when first asked.

    (Importing ``importlib.metadata`` would cost ``import kiln`` tens of milliseconds.)
    Any other missing name raises an ``AttributeError``, with a hint for a PyMC name.
    """
    if name == "__version__":
        from importlib.metadata import version

        return version("kiln")
    raise _missing_name_error("kiln", name)
