"""The array intrinsics of generated code (:mod:`kiln_numba._alloc`) against NumPy.

``empty``, ``zeros``, ``full``, ``copy``, ``contiguous`` and ``array_at`` make arrays
without compiling Numba's overloads of ``np.empty``, ``np.zeros``, ``np.full``,
``np.copy``, ``np.ascontiguousarray`` and ``numba.carray``. Checked here: shapes,
strides, dtypes and values as NumPy gives them, for integer and tuple shapes of every
rank used and every layout, the errors NumPy raises, arrays that outlive the call
(reference counting), that generated code uses them only, and that the same code runs
on NumPy's functions where Numba's internals are not used.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import kiln
import kiln.tensor as kt
from kiln_numba import _alloc
from kiln_numba._alloc import array_at, contiguous, copy, empty, full, zeros
from kiln_numba._numba_internals import usable

pytestmark = pytest.mark.skipif(not usable(), reason="NumPy's own functions are used")


@numba.njit
def _empty_1(n, dtype):  # type: ignore[no-untyped-def]
    return empty(n, dtype)


@numba.njit
def _empty_shape(shape, dtype):  # type: ignore[no-untyped-def]
    return empty(shape, dtype)


@numba.njit
def _zeros_shape(shape, dtype):  # type: ignore[no-untyped-def]
    return zeros(shape, dtype)


@numba.njit
def _full_shape(shape, value, dtype):  # type: ignore[no-untyped-def]
    return full(shape, value, dtype)


@numba.njit
def _literal_shapes():  # type: ignore[no-untyped-def]
    return empty((), np.float64), zeros((2, 3), np.int32), full((3,), 1.5, np.float32)


@numba.njit
def _copy(x):  # type: ignore[no-untyped-def]
    return copy(x)


@numba.njit
def _contiguous(x):  # type: ignore[no-untyped-def]
    return contiguous(x)


@numba.njit
def _array_at(address, shape, dtype):  # type: ignore[no-untyped-def]
    return array_at(address, shape, dtype)


SHAPES = [(), (0,), (5,), (2, 3), (3, 0, 2), (2, 1, 3, 2)]
DTYPES = [np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_, np.complex128]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_arrays_have_numpys_shape_strides_dtype_and_values(shape, dtype) -> None:
    want = np.empty(shape, dtype)
    for got in (_empty_shape(shape, dtype), _zeros_shape(shape, dtype)):
        assert got.shape == want.shape
        assert got.strides == want.strides or want.size == 0  # NumPy's are 0 or not then
        assert got.dtype == want.dtype and got.flags.c_contiguous and got.flags.writeable
    np.testing.assert_array_equal(_zeros_shape(shape, dtype), np.zeros(shape, dtype))
    value = dtype(1) if dtype is not np.bool_ else True
    np.testing.assert_array_equal(_full_shape(shape, value, dtype), np.full(shape, value, dtype))


def test_integer_shapes_dtype_objects_and_casts_of_the_fill_value() -> None:
    assert _empty_1(4, np.float64).shape == (4,)
    assert _empty_1(np.int32(3), np.int16).dtype == np.int16
    assert _empty_shape((2, 2), np.dtype("float32")).dtype == np.float32
    np.testing.assert_array_equal(_full_shape((3,), 2.75, np.int64), np.full(3, 2, np.int64))
    np.testing.assert_array_equal(_full_shape((2,), -np.inf, np.float64), [-np.inf, -np.inf])
    a, b, c = _literal_shapes()
    assert a.shape == () and b.shape == (2, 3) and not b.any()
    np.testing.assert_array_equal(c, np.full(3, 1.5, np.float32))


def test_arrays_are_independent_and_outlive_the_call() -> None:
    arrays = [_full_shape((1000,), float(k), np.float64) for k in range(50)]
    arrays[3][:] = -1.0
    assert all((a == k).all() for k, a in enumerate(arrays) if k != 3)
    assert (arrays[3] == -1.0).all()


def test_bad_sizes_raise_numpys_errors() -> None:
    with pytest.raises(ValueError, match="negative dimensions"):
        _empty_shape((2, -1), np.float64)
    with pytest.raises(ValueError, match="negative dimensions"):
        _empty_1(-3, np.float64)
    with pytest.raises(ValueError, match="array is too big"):
        _zeros_shape((2**40, 2**30), np.float64)
    with pytest.raises(ValueError, match="array is too big"):
        _full_shape((2**62,), 0.0, np.float64)


def test_other_arguments_are_not_typed() -> None:
    with pytest.raises(numba.core.errors.TypingError):
        _empty_shape((2.0, 3.0), np.float64)
    with pytest.raises(numba.core.errors.TypingError):
        _full_shape((2,), np.ones(2), np.float64)


def test_generated_code_allocates_with_the_intrinsics_only() -> None:
    x = kt.matrix("x")
    outs = [
        kt.alloc(kt.exp(x).sum(axis=0), 3, x.shape[1]),
        kt.alloc(2.5, x.shape[0], 4),
        (x * 2.0).max(axis=1),
        x.shape,
    ]
    f = kiln.function([x], outs, mode=kiln.Mode(linker="numba"))
    value = np.arange(6.0).reshape(2, 3)
    want = kiln.function([x], outs, mode=kiln.Mode(rewrites=None, linker="vm"))(value)
    for got, expected in zip(f(value), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-14)
    source = f.thunk.source
    assert "empty(" in source and "np.empty(" not in source
    assert "np.zeros(" not in source and "np.full(" not in source
    assert _alloc.empty is not np.empty


def _layouts() -> list[np.ndarray]:
    """Arrays of every layout Numba types: C, Fortran, strided, 0-d, read-only, empty."""
    base = np.arange(60.0).reshape(3, 4, 5)
    readonly = np.arange(6, dtype=np.int32)
    readonly.flags.writeable = False
    return [
        base,
        base.T,
        base[:, ::2, 1:],
        base[1, :, ::-2],
        np.array(5.0),
        readonly,
        np.zeros((0, 3)),
        np.array([True, False, True])[::2],
    ]


@pytest.mark.parametrize("x", _layouts(), ids=lambda x: f"{x.shape}-{x.strides}")
def test_copies_are_c_contiguous_and_equal(x) -> None:
    got = _copy(x)
    np.testing.assert_array_equal(got, x)
    assert got.dtype == x.dtype and got.flags.c_contiguous and got.flags.writeable
    assert not np.shares_memory(got, x) or x.size == 0
    got = _contiguous(x)
    np.testing.assert_array_equal(got, x)
    assert got.flags.c_contiguous
    # a C-contiguous type is the array itself; any other layout a copy
    same = numba.typeof(x).layout == "C"
    assert np.shares_memory(got, x) == (same and x.size > 0)


def test_arrays_at_an_address_view_the_callers_memory() -> None:
    buffer = np.arange(12, dtype=np.int64)
    view = _array_at(buffer.ctypes.data, (3, 4), np.int64)
    np.testing.assert_array_equal(view, buffer.reshape(3, 4))
    view[1, 2] = -7
    assert buffer[6] == -7
    floats = np.linspace(0.0, 1.0, 5)
    np.testing.assert_array_equal(_array_at(floats.ctypes.data, 5, np.float64), floats)
    assert _array_at(floats.ctypes.data, (), np.float64).shape == ()
    assert _array_at(floats.ctypes.data, (), np.float64)[()] == 0.0


def test_numpys_functions_run_the_same_code_without_numbas_internals(fresh_process) -> None:
    script = """
        import numpy as np
        import kiln_numba._numba_internals as internals

        internals.usable = lambda: False
        from kiln_numba import _alloc

        assert _alloc.empty is np.empty and _alloc.copy is np.copy
        import kiln
        import kiln.tensor as kt

        x = kt.matrix("x")
        outs = [kt.alloc(2.5, x.shape[0], 4), (x * 2.0).max(axis=1), kt.dot(x.T, x), x.shape]
        f = kiln.function([x], outs, mode=kiln.Mode(linker="numba"))
        value = np.arange(6.0).reshape(2, 3)
        got = f(value)
        np.testing.assert_array_equal(got[0], np.full((2, 4), 2.5))
        np.testing.assert_array_equal(got[1], [4.0, 10.0])
        np.testing.assert_allclose(got[2], value.T @ value)
        np.testing.assert_array_equal(got[3], [2, 3])
        print(np.asarray(_alloc.array_at(value.ctypes.data, (3,), np.float64)).tolist())
        """
    assert fresh_process(script) == "[0.0, 1.0, 2.0]"
