"""Arrays made by generated code: ``empty``, ``zeros``, ``full``, ``copy``, ``contiguous``.

NumPy's ``np.empty``, ``np.zeros``, ``np.full``, ``np.copy`` and
``np.ascontiguousarray`` (and ``numba.carray``) are Numba overloads: each shape rank,
layout and dtype compiles its own small function (typing, lowering, LLVM), 0.02-0.1 s
apiece and again in every process that compiles code (measured: about 0.2 s of a cold
compile of the eight-schools model's gradient). These intrinsics write the same code
(one ``NRT_MemInfo_alloc_aligned``, C-contiguous strides, the same errors for negative
dimensions, sizes that overflow and failed allocations) into the caller with nothing
compiled apart.

They take their arguments by position: ``empty(shape, dtype)``, ``zeros(shape, dtype)``,
``full(shape, fill_value, dtype)`` (``shape`` an integer or a tuple of integers,
``dtype`` a NumPy scalar type such as ``np.float64`` or a dtype), ``copy(array)`` (a
C-contiguous copy), ``contiguous(array)`` (the array itself when its type is
C-contiguous, else a copy) and ``array_at(address, shape, dtype)`` (a C-contiguous array
over memory the caller owns, at the integer ``address``). Where kiln_numba does not use
Numba's internals (:func:`kiln_numba._numba_internals.usable`) the same names are
NumPy's functions (and ``numba.carray``), which take the same positional arguments.

``packed(buffer, index, at, ndim)`` is a C-contiguous view of ``ndim`` dimensions into a
one-dimensional C-contiguous ``buffer``: it starts at element ``index[at]`` and its
shape is ``index[at + 2 : at + 2 + ndim]`` (the layout of
:class:`kiln_numba._codegen.ConstantPack`); one call where slicing and reshaping compile
three operations. Without Numba's internals it is None (the packer slices instead).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types

from kiln_numba._numba_internals import allocation_helpers, intrinsic_helpers, usable

__all__ = ["array_at", "contiguous", "copy", "empty", "full", "packed", "zeros"]


def _members(tuple_type: Any) -> tuple[Any, ...]:
    """Return the element types of a Numba tuple type (``UniTuple``, ``Tuple``)."""
    return tuple(tuple_type.types)


def _shape_and_dtype(shape: Any, dtype: Any) -> tuple[int, Any] | None:
    """Return the rank of ``shape`` and the element type ``dtype`` names (None: not ours)."""
    if isinstance(shape, types.Integer):
        ndim = 1
    elif isinstance(shape, types.BaseTuple) and all(
        isinstance(t, types.Integer) for t in _members(shape)
    ):
        ndim = len(_members(shape))
    else:
        return None
    if isinstance(dtype, types.NumberClass):
        element = dtype.instance_type
    elif isinstance(dtype, types.DType):
        element = dtype.dtype
    else:
        return None
    if not isinstance(element, types.Number | types.Boolean):
        return None
    return ndim, element


def _allocate(context: Any, builder: Any, array_type: Any, shape_type: Any, shape: Any) -> Any:
    """Emit the allocation of an uninitialized C-contiguous ``array_type`` of ``shape``.

    Returns the array's structure, its size in bytes and its number of elements.
    """
    cgutils, _, _ = allocation_helpers()
    intp = context.get_value_type(types.intp)
    sizes = _sizes(context, builder, shape_type, shape)
    zero = ir.Constant(intp, 0)
    negative = ir.Constant(ir.IntType(1), 0)
    for size in sizes:
        negative = builder.or_(negative, builder.icmp_signed("<", size, zero))
    with builder.if_then(negative, likely=False):
        context.call_conv.return_user_exc(
            builder, ValueError, ("negative dimensions are not allowed",)
        )
    itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
    elements = ir.Constant(intp, 1)
    overflow = ir.Constant(ir.IntType(1), 0)
    for size in sizes:
        product = builder.smul_with_overflow(elements, size)
        elements = builder.extract_value(product, 0)
        overflow = builder.or_(overflow, builder.extract_value(product, 1))
    product = builder.smul_with_overflow(elements, ir.Constant(intp, itemsize))
    nbytes = builder.extract_value(product, 0)
    overflow = builder.or_(overflow, builder.extract_value(product, 1))
    with builder.if_then(overflow, likely=False):
        context.call_conv.return_user_exc(
            builder,
            ValueError,
            (
                "array is too big; `arr.size * arr.dtype.itemsize` is larger than the "
                "maximum possible size.",
            ),
        )
    align = context.get_preferred_array_alignment(array_type.dtype)
    meminfo = context.nrt.meminfo_alloc_aligned(builder, nbytes, align)
    with builder.if_then(cgutils.is_null(builder, meminfo), likely=False):
        context.call_conv.return_user_exc(
            builder, MemoryError, ("Allocation failed (probably too large).",)
        )
    data = context.nrt.meminfo_data(builder, meminfo)
    return _c_array(context, builder, array_type, data, sizes, meminfo), nbytes, elements


def _sizes(context: Any, builder: Any, shape_type: Any, shape: Any) -> list[Any]:
    """Return the dimensions of ``shape`` (an integer or a tuple of them) as ``intp`` values."""
    if isinstance(shape_type, types.Integer):
        return [context.cast(builder, shape, shape_type, types.intp)]
    return [
        context.cast(builder, builder.extract_value(shape, i), t, types.intp)
        for i, t in enumerate(_members(shape_type))
    ]


def _c_array(
    context: Any, builder: Any, array_type: Any, data: Any, sizes: list[Any], meminfo: Any
) -> Any:
    """Return the structure of a C-contiguous ``array_type`` over ``data`` of ``sizes``."""
    _, make_array, populate_array = allocation_helpers()
    intp = context.get_value_type(types.intp)
    itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
    strides = [ir.Constant(intp, itemsize)] if sizes else []
    for size in reversed(sizes[1:]):
        strides.append(builder.mul(strides[-1], size))
    strides.reverse()
    array = make_array(array_type)(context, builder)
    data_type = context.get_data_type(array_type.dtype).as_pointer()
    populate_array(
        array,
        data=builder.bitcast(data, data_type),
        shape=sizes,
        strides=strides,
        itemsize=ir.Constant(intp, itemsize),
        meminfo=meminfo,
    )
    return array


def _new_array(zeroed: bool) -> Any:
    """Return the typing function of ``np.zeros`` (``zeroed``) or ``np.empty``."""

    def typer(typingctx: Any, shape: Any, dtype: Any) -> Any:
        parsed = _shape_and_dtype(shape, dtype)
        if parsed is None:
            return None
        array_type = types.Array(parsed[1], parsed[0], "C")

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            array, nbytes, _ = _allocate(context, builder, array_type, shape, args[0])
            if zeroed:
                cgutils, _, _ = allocation_helpers()
                cgutils.memset(builder, array.data, nbytes, 0)
            return array._getvalue()

        return array_type(shape, dtype), codegen

    typer.__name__ = typer.__qualname__ = "zeros" if zeroed else "empty"
    typer.__doc__ = f"``np.{typer.__name__}(shape, dtype)``: a new C-contiguous array."
    return typer


_empty = _new_array(zeroed=False)
_zeros = _new_array(zeroed=True)


def _full(typingctx: Any, shape: Any, fill_value: Any, dtype: Any) -> Any:
    """``np.full(shape, fill_value, dtype)``: a C-contiguous array of ``fill_value``."""
    parsed = _shape_and_dtype(shape, dtype)
    if parsed is None or not isinstance(fill_value, types.Number | types.Boolean):
        return None
    array_type = types.Array(parsed[1], parsed[0], "C")

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        cgutils, _, _ = allocation_helpers()
        array, _, elements = _allocate(context, builder, array_type, shape, args[0])
        value = context.cast(builder, args[1], fill_value, array_type.dtype)
        value = context.get_value_as_data(builder, array_type.dtype, value)
        with cgutils.for_range(builder, elements) as loop:
            builder.store(value, builder.gep(array.data, [loop.index]))
        return array._getvalue()

    return array_type(shape, fill_value, dtype), codegen


def _copy_into(context: Any, builder: Any, array_type: Any, source: Any, target: Any) -> None:
    """Emit the copy of every element of ``source`` (of ``array_type``) into C ``target``."""
    cgutils, _, _ = allocation_helpers()
    intp = context.get_value_type(types.intp)
    shape = cgutils.unpack_tuple(builder, source.shape, array_type.ndim)
    strides = cgutils.unpack_tuple(builder, source.strides, array_type.ndim)
    target_strides = cgutils.unpack_tuple(builder, target.strides, array_type.ndim)
    with cgutils.loop_nest(builder, shape, intp) as indices:
        origin = cgutils.get_item_pointer2(
            context, builder, source.data, shape, strides, array_type.layout, indices
        )
        destination = cgutils.get_item_pointer2(
            context, builder, target.data, shape, target_strides, "C", indices
        )
        builder.store(builder.load(origin), destination)


def _copied(context: Any, builder: Any, array_type: Any, value: Any) -> Any:
    """Emit a C-contiguous copy of the array ``value`` of ``array_type``; return its value."""
    cgutils, make_array, _ = allocation_helpers()
    source = make_array(array_type)(context, builder, value=value)
    result_type = types.Array(array_type.dtype, array_type.ndim, "C")
    shape_type = types.UniTuple(types.intp, array_type.ndim)
    target, nbytes, _ = _allocate(context, builder, result_type, shape_type, source.shape)
    if array_type.layout == "C":
        cgutils.raw_memcpy(builder, target.data, source.data, nbytes, 1)
    else:
        _copy_into(context, builder, array_type, source, target)
    return target._getvalue()


def _copy(typingctx: Any, array: Any) -> Any:
    """``np.copy(array)``: a C-contiguous copy."""
    if not isinstance(array, types.Array):
        return None
    result_type = types.Array(array.dtype, array.ndim, "C")

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return _copied(context, builder, array, args[0])

    return result_type(array), codegen


def _contiguous(typingctx: Any, array: Any) -> Any:
    """``np.ascontiguousarray(array)``: ``array`` if its type is C-contiguous, else a copy."""
    if not isinstance(array, types.Array):
        return None
    if array.layout == "C":

        def borrow(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            _, impl_ret_borrowed = intrinsic_helpers()
            return impl_ret_borrowed(context, builder, array, args[0])

        return array(array), borrow

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return _copied(context, builder, array, args[0])

    return types.Array(array.dtype, array.ndim, "C")(array), codegen


def _array_at(typingctx: Any, address: Any, shape: Any, dtype: Any) -> Any:
    """``numba.carray(address, shape, dtype)`` at an integer address: no copy, no owner."""
    parsed = _shape_and_dtype(shape, dtype)
    if parsed is None or not isinstance(address, types.Integer):
        return None
    array_type = types.Array(parsed[1], parsed[0], "C")

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        sizes = _sizes(context, builder, shape, args[1])
        data = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return _c_array(context, builder, array_type, data, sizes, None)._getvalue()

    return array_type(address, shape, dtype), codegen


def _packed(typingctx: Any, buffer: Any, index: Any, at: Any, ndim: Any) -> Any:
    """Type ``packed``: a view of ``ndim`` dimensions into ``buffer`` at ``index[at]``."""
    if not (
        isinstance(buffer, types.Array)
        and buffer.ndim == 1
        and buffer.layout == "C"
        and isinstance(index, types.Array)
        and index.ndim == 1
        and isinstance(index.dtype, types.Integer)
        and isinstance(at, types.Integer)
        and isinstance(ndim, types.IntegerLiteral)
    ):
        return None
    rank = ndim.literal_value
    array_type = types.Array(buffer.dtype, rank, "C", readonly=not buffer.mutable)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        _, make_array, _ = allocation_helpers()
        source = make_array(buffer)(context, builder, value=args[0])
        entries = make_array(index)(context, builder, value=args[1]).data
        first = context.cast(builder, args[2], at, types.intp)

        def entry(offset: int) -> Any:
            k = builder.add(first, ir.Constant(first.type, offset))
            value = builder.load(builder.gep(entries, [k]))
            return context.cast(builder, value, index.dtype, types.intp)

        data = builder.gep(source.data, [entry(0)])
        sizes = [entry(2 + d) for d in range(rank)]
        view = _c_array(context, builder, array_type, data, sizes, source.meminfo)
        view.parent = source.parent
        context.nrt.incref(builder, buffer, args[0])
        return view._getvalue()

    return array_type(buffer, index, at, ndim), codegen


if usable():
    from numba.extending import intrinsic

    empty: Any = intrinsic(_empty)
    zeros: Any = intrinsic(_zeros)
    full: Any = intrinsic(_full)
    copy: Any = intrinsic(_copy)
    contiguous: Any = intrinsic(_contiguous)
    array_at: Any = intrinsic(_array_at)
    packed: Any = intrinsic(_packed)
else:  # Numba's overloads of NumPy's functions, through their public names
    from numba import carray, njit

    from kiln_numba._native_jit import address_as_void_pointer

    _void_pointer: Any = address_as_void_pointer
    packed = None

    empty, zeros, full, copy, contiguous = (
        np.empty,
        np.zeros,
        np.full,
        np.copy,
        np.ascontiguousarray,
    )

    @njit(inline="always")
    def array_at(address: int, shape: Any, dtype: Any) -> Any:
        """``numba.carray`` at an integer address (public API)."""
        return carray(_void_pointer(address), shape, dtype)
