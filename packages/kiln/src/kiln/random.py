"""``kiln.random``: random-variable draws, like ``numpy.random`` (see :mod:`kiln_random`)."""

from kiln_random import *  # noqa: F403
from kiln_random import __doc__ as __doc__
