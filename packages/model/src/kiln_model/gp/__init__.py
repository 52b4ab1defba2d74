"""Gaussian processes, as PyMC's ``pm.gp``.

``kl.gp.Latent`` and ``kl.gp.Marginal``, the covariances of ``kl.gp.cov`` and the mean
functions of ``kl.gp.mean``.

Examples
--------
>>> import numpy as np
>>> import kiln as kl
>>> X = np.linspace(0, 10, 30)[:, None]
>>> with kl.Model():  # doctest: +SKIP
...     ls = kl.Gamma("ls", 2, 1)
...     eta = kl.HalfNormal("eta", 2)
...     gp = kl.gp.Marginal(cov_func=eta**2 * kl.gp.cov.ExpQuad(1, ls=ls))
...     gp.marginal_likelihood("y", X=X, y=np.sin(X[:, 0]), sigma=0.1)
"""

from kiln_model.gp import cov as cov
from kiln_model.gp import mean as mean
from kiln_model.gp._gp import TP as TP
from kiln_model.gp._gp import Latent as Latent
from kiln_model.gp._gp import LatentKron as LatentKron
from kiln_model.gp._gp import Marginal as Marginal
from kiln_model.gp._gp import MarginalApprox as MarginalApprox
from kiln_model.gp._gp import MarginalKron as MarginalKron
from kiln_model.gp._gp import MarginalSparse as MarginalSparse
from kiln_model.gp._gp import cartesian as cartesian
from kiln_model.gp._gp import kron_diag as kron_diag
from kiln_model.gp._gp import kron_dot as kron_dot
from kiln_model.gp._gp import kron_solve_lower as kron_solve_lower
from kiln_model.gp._gp import stabilize as stabilize
from kiln_model.gp._hsgp import HSGP as HSGP
from kiln_model.gp._hsgp_periodic import HSGPPeriodic as HSGPPeriodic
