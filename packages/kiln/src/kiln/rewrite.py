"""Stage 1, the rewriter: ``kiln.rewrite.pipeline()`` prints the phases and their rewrites.

See :mod:`kiln_rewrite`.
"""

from kiln_rewrite import FAST_COMPILE_QUERY as FAST_COMPILE_QUERY
from kiln_rewrite import FAST_RUN_QUERY as FAST_RUN_QUERY
from kiln_rewrite import PHASES as PHASES
from kiln_rewrite import Query as Query
from kiln_rewrite import RewriteStats as RewriteStats
from kiln_rewrite import db as db
from kiln_rewrite import pipeline as pipeline
from kiln_rewrite import register_global as register_global
from kiln_rewrite import register_local as register_local
from kiln_rewrite import register_pattern as register_pattern
from kiln_rewrite import rewrite as rewrite
