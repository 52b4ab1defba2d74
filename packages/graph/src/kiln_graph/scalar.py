"""The scalar ops (what an ``Elemwise`` applies per element) and their dtype rules.

The public surface for packages that extend kiln: rewrites match these classes
(``isinstance(node.op.scalar_op, Exp)``) and backends register an implementation for
each. Every class is defined in ``kiln_graph._math`` (one row per op: NumPy
implementation, dtype rule, gradient) or ``kiln_graph._elemwise`` / ``_composite``.
"""

from kiln_graph._composite import Composite as Composite
from kiln_graph._composite import ScalarConstant as ScalarConstant
from kiln_graph._elemwise import Cast as Cast
from kiln_graph._elemwise import ScalarOp as ScalarOp
from kiln_graph._elemwise import bool_out as bool_out
from kiln_graph._elemwise import upcast as upcast
from kiln_graph._elemwise import upgrade_to_float as upgrade_to_float
from kiln_graph._math import AND as AND
from kiln_graph._math import EQ as EQ
from kiln_graph._math import GE as GE
from kiln_graph._math import GT as GT
from kiln_graph._math import I0 as I0
from kiln_graph._math import I1 as I1
from kiln_graph._math import LE as LE
from kiln_graph._math import LT as LT
from kiln_graph._math import NEQ as NEQ
from kiln_graph._math import NOT as NOT
from kiln_graph._math import OR as OR
from kiln_graph._math import Abs as Abs
from kiln_graph._math import Add as Add
from kiln_graph._math import Arcsinh as Arcsinh
from kiln_graph._math import Arctan as Arctan
from kiln_graph._math import Betaln as Betaln
from kiln_graph._math import Ceil as Ceil
from kiln_graph._math import Clip as Clip
from kiln_graph._math import Cos as Cos
from kiln_graph._math import Cosh as Cosh
from kiln_graph._math import Digamma as Digamma
from kiln_graph._math import Erf as Erf
from kiln_graph._math import Erfc as Erfc
from kiln_graph._math import Erfcx as Erfcx
from kiln_graph._math import Erfinv as Erfinv
from kiln_graph._math import Exp as Exp
from kiln_graph._math import Exp2 as Exp2
from kiln_graph._math import Expm1 as Expm1
from kiln_graph._math import Floor as Floor
from kiln_graph._math import FloorDivide as FloorDivide
from kiln_graph._math import Gammaln as Gammaln
from kiln_graph._math import I0e as I0e
from kiln_graph._math import I1e as I1e
from kiln_graph._math import IsInf as IsInf
from kiln_graph._math import IsNan as IsNan
from kiln_graph._math import Log as Log
from kiln_graph._math import Log1mexp as Log1mexp
from kiln_graph._math import Log1p as Log1p
from kiln_graph._math import Log2 as Log2
from kiln_graph._math import Log10 as Log10
from kiln_graph._math import Logaddexp as Logaddexp
from kiln_graph._math import Logit as Logit
from kiln_graph._math import Maximum as Maximum
from kiln_graph._math import Minimum as Minimum
from kiln_graph._math import Mod as Mod
from kiln_graph._math import Mul as Mul
from kiln_graph._math import Neg as Neg
from kiln_graph._math import Polygamma as Polygamma
from kiln_graph._math import Pow as Pow
from kiln_graph._math import Reciprocal as Reciprocal
from kiln_graph._math import Round as Round
from kiln_graph._math import Sigmoid as Sigmoid
from kiln_graph._math import Sign as Sign
from kiln_graph._math import Sin as Sin
from kiln_graph._math import Sinh as Sinh
from kiln_graph._math import Softplus as Softplus
from kiln_graph._math import Sqrt as Sqrt
from kiln_graph._math import Square as Square
from kiln_graph._math import Sub as Sub
from kiln_graph._math import Switch as Switch
from kiln_graph._math import Tan as Tan
from kiln_graph._math import Tanh as Tanh
from kiln_graph._math import TrueDivide as TrueDivide
from kiln_graph._math import like_ufunc as like_ufunc
from kiln_graph._math import log1mexp_formula as log1mexp_formula
from kiln_graph._types import DISCRETE_DTYPES as DISCRETE_DTYPES
from kiln_graph._types import FLOAT_DTYPES as FLOAT_DTYPES
from kiln_graph._types import INTEGER_DTYPES as INTEGER_DTYPES
