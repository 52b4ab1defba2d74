"""Types of graph variables: tensors and random generators."""

from __future__ import annotations

from typing import Any

import numpy as np

from kiln_graph._errors import KilnTypeError

_VALID_DTYPES = frozenset(
    [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    ]
)

FLOAT_DTYPES = frozenset(["float16", "float32", "float64"])
INTEGER_DTYPES = frozenset(
    ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
)
DISCRETE_DTYPES = INTEGER_DTYPES | {"bool"}


def normalize_dtype(dtype: Any) -> str:
    """Return the canonical name of ``dtype`` (``"float64"``, ``"int32"``, ...).

    Raises
    ------
    KilnTypeError
        If ``dtype`` is not a numeric or boolean NumPy dtype.
    """
    if isinstance(dtype, str) and dtype in _VALID_DTYPES:
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError as exc:
        raise KilnTypeError(f"dtype: expected a NumPy dtype, got {dtype!r}") from exc
    if name not in _VALID_DTYPES:
        raise KilnTypeError(
            f"dtype: {name!r} is not supported; expected one of {sorted(_VALID_DTYPES)}"
        )
    return name


class Type:
    """Base class of variable types. Types are immutable and compared by value."""

    def filter(self, value: Any, name: str = "value") -> Any:
        """Return ``value`` converted to this type, or raise a clear error."""
        raise NotImplementedError

    def key(self) -> tuple[Any, ...]:
        """Return the tuple that defines equality, hashing and the digest."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.key() == other.key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.key()))


class TensorType(Type):
    """The type of an n-dimensional array with a dtype and a static shape.

    Each entry of ``shape`` is a non-negative ``int`` (the length is known when the
    graph is built) or ``None`` (known only at run time).

    Examples
    --------
    >>> TensorType("float64", (None, 3))
    TensorType(float64, shape=(None, 3))
    """

    __slots__ = ("dtype", "shape", "broadcastable", "_hash", "_np_dtype")

    def __init__(self, dtype: Any, shape: tuple[int | None, ...] = ()) -> None:
        self.dtype: str = normalize_dtype(dtype)
        self._np_dtype = np.dtype(self.dtype)
        try:
            dims = tuple(shape)
        except TypeError as exc:
            raise KilnTypeError(f"shape: expected a tuple of int or None, got {shape!r}") from exc
        clean: list[int | None] = []
        for d in dims:
            if d is None:
                clean.append(None)
            elif isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0:
                clean.append(int(d))
            else:
                raise KilnTypeError(
                    f"shape: each dimension must be a non-negative int or None, got {shape!r}"
                )
        self.shape: tuple[int | None, ...] = tuple(clean)
        #: For each dimension, whether its static length is 1.
        self.broadcastable: tuple[bool, ...] = tuple(d == 1 for d in clean)
        self._hash = hash(("TensorType", self.dtype, self.shape))

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def key(self) -> tuple[Any, ...]:
        return (self.dtype, self.shape)

    def __reduce__(self) -> Any:
        # Rebuild from dtype and shape: the cached hash differs between processes.
        return (TensorType, (self.dtype, self.shape))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"TensorType({self.dtype}, shape={self.shape})"

    def clone(self, dtype: Any = None, shape: tuple[int | None, ...] | None = None) -> TensorType:
        """Return a copy with ``dtype`` and/or ``shape`` replaced."""
        return TensorType(
            self.dtype if dtype is None else dtype, self.shape if shape is None else shape
        )

    def is_super(self, other: Type) -> bool:
        """Whether every value of ``other`` is also a value of this type."""
        if not isinstance(other, TensorType):
            return False
        if other.dtype != self.dtype or other.ndim != self.ndim:
            return False
        return all(s is None or s == o for s, o in zip(self.shape, other.shape, strict=True))

    def filter(self, value: Any, name: str = "value") -> np.ndarray:
        """Return ``value`` as an array of this type.

        Only casts that keep every value exactly are done (e.g. ``int`` lists to
        ``float64``); anything else is an error that names ``name``.
        """
        if isinstance(value, np.ndarray) and value.dtype == self._np_dtype:
            arr = value
            if arr.ndim == len(self.shape) and all(
                s is None or s == a for s, a in zip(self.shape, arr.shape, strict=True)
            ):
                return arr  # the common case, kept fast for per-call input checks
        else:
            arr = np.asarray(value)
            if arr.dtype.name != self.dtype:
                if not _safe_to_cast(arr, self.dtype):
                    raise KilnTypeError(
                        f"{name}: expected dtype {self.dtype}, got {arr.dtype.name}; "
                        f"cast it first (e.g. np.asarray(x, dtype={self.dtype!r}))"
                    )
                arr = arr.astype(self.dtype)
        if arr.ndim != self.ndim:
            raise KilnTypeError(
                f"{name}: expected {self.ndim} dimension(s) (static shape {self.shape}), "
                f"got an array with shape {arr.shape}"
            )
        for i, (s, a) in enumerate(zip(self.shape, arr.shape, strict=True)):
            if s is not None and s != a:
                raise KilnTypeError(
                    f"{name}: expected static shape {self.shape}, got an array with shape "
                    f"{arr.shape} (dimension {i} differs)"
                )
        return arr


def _safe_to_cast(arr: np.ndarray, dtype: str) -> bool:
    if np.can_cast(arr.dtype, dtype, casting="safe"):
        return True
    # Python ints/floats arrive as int64/float64 arrays: accept when the values survive
    # (NaN included: it survives a cast between float dtypes).
    if arr.dtype.kind in "biuf" and np.dtype(dtype).kind in "biuf":
        with np.errstate(all="ignore"):
            cast = arr.astype(dtype)
        return bool(np.array_equal(cast, arr, equal_nan=True))
    return False


class RandomGeneratorType(Type):
    """The type of a NumPy ``Generator`` threaded through a graph as state."""

    __slots__ = ()

    def key(self) -> tuple[Any, ...]:
        return ()

    def __repr__(self) -> str:
        return "RandomGeneratorType()"

    def filter(self, value: Any, name: str = "value") -> np.random.Generator:
        """Return ``value`` if it is a ``numpy.random.Generator``, else raise."""
        if not isinstance(value, np.random.Generator):
            raise KilnTypeError(
                f"{name}: expected a numpy.random.Generator, got {type(value).__name__}"
            )
        return value

    def is_super(self, other: Type) -> bool:
        """Whether ``other`` is also a generator type."""
        return isinstance(other, RandomGeneratorType)
