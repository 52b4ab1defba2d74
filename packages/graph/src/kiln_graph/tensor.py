"""The tensor API, NumPy-like: ``import kiln.tensor as kt``.

Functions build symbolic graphs with NumPy broadcasting and dtype promotion (NEP 50:
Python scalars adopt the dtype of the tensors they meet).
"""

# One block, sorted by module. Each private module holds one family of functions:
# _basic (variables and constants), _blockwise, _elemwise (cast, dimshuffle), _grad
# (autodiff), _join (concatenate, stack), _linalg, _math (elementwise math and
# comparisons), _nnet (softmax, log_softmax), _ranges and _shape (shape ops), _reduce
# (reductions), _subtensor (indexing).
from kiln_graph._alloc import alloc as alloc
from kiln_graph._alloc import ones_like as ones_like
from kiln_graph._alloc import shape as shape
from kiln_graph._alloc import shape_i as shape_i
from kiln_graph._alloc import zeros_like as zeros_like
from kiln_graph._basic import as_tensor as as_tensor
from kiln_graph._basic import constant as constant
from kiln_graph._basic import matrix as matrix
from kiln_graph._basic import scalar as scalar
from kiln_graph._basic import shared as shared
from kiln_graph._basic import tensor as tensor
from kiln_graph._basic import vector as vector
from kiln_graph._blockwise import Blockwise as Blockwise
from kiln_graph._blockwise import vectorize as vectorize
from kiln_graph._elemwise import cast as cast
from kiln_graph._elemwise import dimshuffle as dimshuffle
from kiln_graph._getitem import getitem as getitem
from kiln_graph._getitem import inc_subtensor as inc_subtensor
from kiln_graph._getitem import set_subtensor as set_subtensor
from kiln_graph._grad import grad as grad
from kiln_graph._grad import hessian as hessian
from kiln_graph._grad import jacobian as jacobian
from kiln_graph._join import concatenate as concatenate
from kiln_graph._join import stack as stack
from kiln_graph._linalg import cholesky as cholesky
from kiln_graph._linalg import det as det
from kiln_graph._linalg import dot as dot
from kiln_graph._linalg import eigh as eigh
from kiln_graph._linalg import inv as inv
from kiln_graph._linalg import kron as kron
from kiln_graph._linalg import matmul as matmul
from kiln_graph._linalg import outer as outer
from kiln_graph._linalg import slogdet as slogdet
from kiln_graph._linalg import solve as solve
from kiln_graph._linalg import solve_triangular as solve_triangular
from kiln_graph._math import abs as abs  # noqa: A004
from kiln_graph._math import add as add
from kiln_graph._math import arcsinh as arcsinh
from kiln_graph._math import arctan as arctan
from kiln_graph._math import betainc as betainc
from kiln_graph._math import betainc_da as betainc_da
from kiln_graph._math import betainc_db as betainc_db
from kiln_graph._math import betaln as betaln
from kiln_graph._math import ceil as ceil
from kiln_graph._math import clip as clip
from kiln_graph._math import cos as cos
from kiln_graph._math import cosh as cosh
from kiln_graph._math import digamma as digamma
from kiln_graph._math import eq as eq
from kiln_graph._math import erf as erf
from kiln_graph._math import erfc as erfc
from kiln_graph._math import erfcx as erfcx
from kiln_graph._math import erfinv as erfinv
from kiln_graph._math import exp as exp
from kiln_graph._math import exp2 as exp2
from kiln_graph._math import expm1 as expm1
from kiln_graph._math import floor as floor
from kiln_graph._math import floor_divide as floor_divide
from kiln_graph._math import gammainc as gammainc
from kiln_graph._math import gammainc_da as gammainc_da
from kiln_graph._math import gammaincc as gammaincc
from kiln_graph._math import gammaincc_da as gammaincc_da
from kiln_graph._math import gammaln as gammaln
from kiln_graph._math import ge as ge
from kiln_graph._math import gt as gt
from kiln_graph._math import i0 as i0
from kiln_graph._math import i0e as i0e
from kiln_graph._math import i1 as i1
from kiln_graph._math import i1e as i1e
from kiln_graph._math import isinf as isinf
from kiln_graph._math import isnan as isnan
from kiln_graph._math import le as le
from kiln_graph._math import log as log
from kiln_graph._math import log1mexp as log1mexp
from kiln_graph._math import log1p as log1p
from kiln_graph._math import log2 as log2
from kiln_graph._math import log10 as log10
from kiln_graph._math import logaddexp as logaddexp
from kiln_graph._math import logical_and as logical_and
from kiln_graph._math import logical_not as logical_not
from kiln_graph._math import logical_or as logical_or
from kiln_graph._math import logit as logit
from kiln_graph._math import lt as lt
from kiln_graph._math import maximum as maximum
from kiln_graph._math import minimum as minimum
from kiln_graph._math import mod as mod
from kiln_graph._math import mul as mul
from kiln_graph._math import neg as neg
from kiln_graph._math import neq as neq
from kiln_graph._math import polygamma as polygamma
from kiln_graph._math import pow as pow  # noqa: A004
from kiln_graph._math import reciprocal as reciprocal
from kiln_graph._math import round as round  # noqa: A004
from kiln_graph._math import sigmoid as sigmoid
from kiln_graph._math import sign as sign
from kiln_graph._math import sin as sin
from kiln_graph._math import sinh as sinh
from kiln_graph._math import softplus as softplus
from kiln_graph._math import sqrt as sqrt
from kiln_graph._math import square as square
from kiln_graph._math import sub as sub
from kiln_graph._math import switch as switch
from kiln_graph._math import tan as tan
from kiln_graph._math import tanh as tanh
from kiln_graph._math import true_divide as true_divide
from kiln_graph._math import where as where
from kiln_graph._nnet import log_softmax as log_softmax
from kiln_graph._nnet import softmax as softmax
from kiln_graph._ranges import arange as arange
from kiln_graph._ranges import eye as eye
from kiln_graph._reduce import all as all  # noqa: A004
from kiln_graph._reduce import any as any  # noqa: A004
from kiln_graph._reduce import argmax as argmax
from kiln_graph._reduce import cumsum as cumsum
from kiln_graph._reduce import logsumexp as logsumexp
from kiln_graph._reduce import max as max  # noqa: A004
from kiln_graph._reduce import mean as mean
from kiln_graph._reduce import min as min  # noqa: A004
from kiln_graph._reduce import prod as prod
from kiln_graph._reduce import std as std
from kiln_graph._reduce import sum as sum  # noqa: A004
from kiln_graph._reduce import var as var
from kiln_graph._shape import broadcast_to as broadcast_to
from kiln_graph._shape import expand_dims as expand_dims
from kiln_graph._shape import flatten as flatten
from kiln_graph._shape import full as full
from kiln_graph._shape import ones as ones
from kiln_graph._shape import reshape as reshape
from kiln_graph._shape import squeeze as squeeze
from kiln_graph._shape import transpose as transpose
from kiln_graph._shape import zeros as zeros
