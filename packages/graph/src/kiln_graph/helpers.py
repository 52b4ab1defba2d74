"""Functions that build or inspect graphs, for packages that extend kiln.

Rewrites, linkers and random-variable ops use these; a model author needs only
:mod:`kiln_graph.tensor` (which also holds ``cast``, ``dimshuffle``, ``getitem`` and
``shape_i``: they are not repeated here). Each is defined in the private module of its
family.
"""

from kiln_graph._alloc import shape_tuple as shape_tuple
from kiln_graph._basic import shape_constant as shape_constant
from kiln_graph._blockwise import parse_signature as parse_signature
from kiln_graph._collection import collect_and_freeze as collect_and_freeze
from kiln_graph._collection import freeze_survivors as freeze_survivors
from kiln_graph._collection import long_lived_objects as long_lived_objects
from kiln_graph._elemwise import can_overwrite as can_overwrite
from kiln_graph._elemwise import static_broadcast as static_broadcast
from kiln_graph._shape import as_shape_vector as as_shape_vector
from kiln_graph._shape import static_entries as static_entries
from kiln_graph._traversal import uses_any as uses_any
