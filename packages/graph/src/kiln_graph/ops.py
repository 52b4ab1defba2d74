"""The op classes of the graph IR, by family: what rewrites match and backends implement.

The public surface for packages that extend kiln (rewrites, linkers): each class is
defined in the private module of its family (``kiln_graph._shape``, ``_reduce``,
``_linalg``, ...), next to its ``perform``, gradient and shape rules. Scalar ops (what an
:class:`Elemwise` applies per element) are in :mod:`kiln_graph.scalar`; helpers that
build or inspect graphs are in :mod:`kiln_graph.helpers`.
"""

# The graph's building blocks.
from kiln_graph._advanced_subtensor import AdvancedIncSubtensor as AdvancedIncSubtensor
from kiln_graph._advanced_subtensor import AdvancedIncSubtensor1 as AdvancedIncSubtensor1
from kiln_graph._advanced_subtensor import AdvancedSubtensor as AdvancedSubtensor
from kiln_graph._advanced_subtensor import AdvancedSubtensor1 as AdvancedSubtensor1
from kiln_graph._alloc import Alloc as Alloc
from kiln_graph._alloc import Shape as Shape
from kiln_graph._alloc import ShapeI as ShapeI
from kiln_graph._blockwise import Blockwise as Blockwise
from kiln_graph._composite import ProgramBuilder as ProgramBuilder
from kiln_graph._elemwise import DimShuffle as DimShuffle
from kiln_graph._elemwise import Elemwise as Elemwise
from kiln_graph._fused_reduce import FusedReduce as FusedReduce
from kiln_graph._join import Join as Join
from kiln_graph._join import Split as Split
from kiln_graph._linalg import Cholesky as Cholesky
from kiln_graph._linalg import Det as Det
from kiln_graph._linalg import Eigh as Eigh
from kiln_graph._linalg import Inv as Inv
from kiln_graph._linalg import MatMul as MatMul
from kiln_graph._linalg import SlogDet as SlogDet
from kiln_graph._linalg import Solve as Solve
from kiln_graph._linalg import SolveTriangular as SolveTriangular
from kiln_graph._linalg import Tri as Tri
from kiln_graph._linalg import normalize_eigenvector_signs as normalize_eigenvector_signs
from kiln_graph._node import Op as Op
from kiln_graph._opfromgraph import OpFromGraph as OpFromGraph
from kiln_graph._ranges import ARange as ARange
from kiln_graph._ranges import Eye as Eye
from kiln_graph._reduce import Argmax as Argmax
from kiln_graph._reduce import CAReduce as CAReduce
from kiln_graph._reduce import CumSum as CumSum
from kiln_graph._shape import MakeVector as MakeVector
from kiln_graph._shape import Reshape as Reshape
from kiln_graph._subtensor import IncSubtensor as IncSubtensor
from kiln_graph._subtensor import Subtensor as Subtensor
