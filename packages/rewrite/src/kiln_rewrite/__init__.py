"""kiln_rewrite: Stage 1, the rewriter.

One rewrite database (:data:`db`); rewrites are registered with a name, tags and a
phase; the phases (:data:`PHASES`) run in order; a :class:`Query` selects rewrites by
tags. :func:`rewrite` applies a query to a graph; :func:`pipeline` prints what runs.
"""

from kiln_rewrite import canonicalize, fusion, inplace, loop_fusion, random, specialize, stabilize
from kiln_rewrite._db import PHASE_RULES as PHASE_RULES
from kiln_rewrite._db import PHASES as PHASES
from kiln_rewrite._db import Query as Query
from kiln_rewrite._db import Rewrite as Rewrite
from kiln_rewrite._db import RewriteDB as RewriteDB
from kiln_rewrite._db import db as db
from kiln_rewrite._db import register_global as register_global
from kiln_rewrite._db import register_local as register_local
from kiln_rewrite._engine import RewriteLoopError as RewriteLoopError
from kiln_rewrite._engine import RewriteTypeError as RewriteTypeError
from kiln_rewrite._engine import rewrite_graph as rewrite_graph
from kiln_rewrite._patterns import E as E
from kiln_rewrite._patterns import Pat as Pat
from kiln_rewrite._patterns import PVar as PVar
from kiln_rewrite._patterns import match as match
from kiln_rewrite._patterns import register_pattern as register_pattern
from kiln_rewrite._patterns import scalar_constant as scalar_constant
from kiln_rewrite._pipeline import FAST_COMPILE_QUERY as FAST_COMPILE_QUERY
from kiln_rewrite._pipeline import FAST_RUN_QUERY as FAST_RUN_QUERY
from kiln_rewrite._pipeline import pipeline as pipeline
from kiln_rewrite._pipeline import rewrite as rewrite
from kiln_rewrite._stable_grad import STABILIZE_QUERY as STABILIZE_QUERY
from kiln_rewrite._stable_grad import stabilize_graph as stabilize_graph
from kiln_rewrite._stable_grad import stable_grad as stable_grad
from kiln_rewrite._stats import RewriteStats as RewriteStats

__all__ = [
    "canonicalize",
    "fusion",
    "inplace",
    "loop_fusion",
    "random",
    "specialize",
    "stabilize",
]
