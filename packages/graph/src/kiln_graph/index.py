"""The encoding of basic and advanced indices, for linkers that implement indexing ops.

An index list holds one entry per index item: ``INT`` (an integer input), ``ARRAY`` (an
index-array input), ``NEWAXIS``, or a slice's ``(start, stop, step)`` kinds; see
``kiln_graph._index``, where indexing ops are defined.
"""

from kiln_graph._index import ARRAY as ARRAY
from kiln_graph._index import INT as INT
from kiln_graph._index import NEWAXIS as NEWAXIS
from kiln_graph._index import group as group
from kiln_graph._index import layout as layout
