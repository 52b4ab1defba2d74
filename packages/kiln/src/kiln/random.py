"""``kiln.random``: random-variable draws, like ``numpy.random`` (see :mod:`kiln_random`)."""

import kiln_random as _kiln_random
from kiln_random import *  # noqa: F403

__doc__ = _kiln_random.__doc__  # noqa: A001  (the page of kl.random is kiln_random's)
