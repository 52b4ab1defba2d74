"""kiln_graph: the symbolic tensor graph IR, its Ops, autodiff and shape inference.

Nodes are immutable and interned (see DESIGN.md): building the same expression twice
gives the same node. The NumPy-like user API is :mod:`kiln_graph.tensor`; packages that
extend kiln (rewrites, linkers, random-variable ops) use ``kiln_graph.ops`` (the op
classes), ``kiln_graph.scalar`` (the scalar ops and dtype rules) and
``kiln_graph.helpers`` (functions that build or inspect graphs).
"""

from kiln_graph import tensor
from kiln_graph._advanced_subtensor import AdvancedIncSubtensor as AdvancedIncSubtensor
from kiln_graph._advanced_subtensor import AdvancedIncSubtensor1 as AdvancedIncSubtensor1
from kiln_graph._advanced_subtensor import AdvancedSubtensor as AdvancedSubtensor
from kiln_graph._advanced_subtensor import AdvancedSubtensor1 as AdvancedSubtensor1
from kiln_graph._blockwise import Blockwise as Blockwise
from kiln_graph._composite import Composite as Composite
from kiln_graph._composite import ScalarConstant as ScalarConstant
from kiln_graph._elemwise import DimShuffle as DimShuffle
from kiln_graph._elemwise import Elemwise as Elemwise
from kiln_graph._elemwise import ScalarOp as ScalarOp
from kiln_graph._errors import DisconnectedInputError as DisconnectedInputError
from kiln_graph._errors import GradientError as GradientError
from kiln_graph._errors import KilnError as KilnError
from kiln_graph._errors import KilnIndexError as KilnIndexError
from kiln_graph._errors import KilnTypeError as KilnTypeError
from kiln_graph._errors import KilnValueError as KilnValueError
from kiln_graph._errors import ShapeMismatchError as ShapeMismatchError
from kiln_graph._fused_reduce import FusedReduce as FusedReduce
from kiln_graph._grad import grad as grad
from kiln_graph._grad import hessian as hessian
from kiln_graph._grad import jacobian as jacobian
from kiln_graph._interp import MissingInputError as MissingInputError
from kiln_graph._interp import Program as Program
from kiln_graph._node import Apply as Apply
from kiln_graph._node import Constant as Constant
from kiln_graph._node import Op as Op
from kiln_graph._node import Props as Props
from kiln_graph._node import SharedVariable as SharedVariable
from kiln_graph._node import TensorSharedVariable as TensorSharedVariable
from kiln_graph._node import TensorVariable as TensorVariable
from kiln_graph._node import Variable as Variable
from kiln_graph._node import as_variable_list as as_variable_list
from kiln_graph._node import install_tensor_operators
from kiln_graph._opfromgraph import OpFromGraph as OpFromGraph
from kiln_graph._printing import dprint as dprint
from kiln_graph._printing import format_graph as format_graph
from kiln_graph._shape_infer import infer_shape as infer_shape
from kiln_graph._subtensor import IncSubtensor as IncSubtensor
from kiln_graph._subtensor import Subtensor as Subtensor
from kiln_graph._traversal import ancestors as ancestors
from kiln_graph._traversal import graph_inputs as graph_inputs
from kiln_graph._traversal import graph_replace as graph_replace
from kiln_graph._traversal import schedule as schedule
from kiln_graph._traversal import toposort as toposort
from kiln_graph._types import RandomGeneratorType as RandomGeneratorType
from kiln_graph._types import TensorType as TensorType
from kiln_graph._types import Type as Type

install_tensor_operators(tensor)
