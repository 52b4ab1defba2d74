"""A stable byte encoding of Op props and type keys, identical across processes."""

from __future__ import annotations

from typing import Any

import numpy as np


def encode(value: Any) -> bytes:
    """Encode ``value`` (props: ints, strings, tuples, dtypes, Ops, arrays...) as bytes.

    The encoding is deterministic (no ``hash()``/``id()``), so digests built from it
    are equal across processes.
    """
    out: list[bytes] = []
    _encode(value, out)
    return b"".join(out)


def _encode(value: Any, out: list[bytes]) -> None:
    if value is None:
        out.append(b"N;")
    elif isinstance(value, bool | np.bool_):
        out.append(b"B1;" if value else b"B0;")
    elif isinstance(value, int | np.integer):
        out.append(b"I" + str(int(value)).encode() + b";")
    elif isinstance(value, float | np.floating):
        out.append(b"F" + float(value).hex().encode() + b";")
    elif isinstance(value, complex):
        out.append(b"C" + value.real.hex().encode() + b"," + value.imag.hex().encode() + b";")
    elif isinstance(value, str):
        raw = value.encode()
        out.append(b"S" + str(len(raw)).encode() + b":" + raw)
    elif isinstance(value, bytes):
        out.append(b"Y" + str(len(value)).encode() + b":" + value)
    elif isinstance(value, tuple | list):
        out.append(b"T" + str(len(value)).encode() + b"(")
        for v in value:
            _encode(v, out)
        out.append(b")")
    elif isinstance(value, frozenset):
        _encode(tuple(sorted(value, key=repr)), out)
    elif isinstance(value, dict):
        _encode(tuple(sorted(value.items(), key=lambda kv: repr(kv[0]))), out)
    elif isinstance(value, slice):
        out.append(b"L")
        _encode((value.start, value.stop, value.step), out)
    elif isinstance(value, np.dtype):
        _encode("dtype:" + value.name, out)
    elif isinstance(value, np.ndarray):
        out.append(b"A")
        _encode((value.dtype.name, value.shape), out)
        out.append(np.ascontiguousarray(value).tobytes())
    elif hasattr(value, "digest_bytes"):
        out.append(b"D" + value.digest_bytes)
    elif hasattr(value, "key") and callable(value.key):
        # Types and other key-defined values.
        out.append(b"K" + f"{type(value).__module__}.{type(value).__qualname__}".encode())
        _encode(value.key(), out)
    elif hasattr(value, "__props__"):
        out.append(b"P" + f"{type(value).__module__}.{type(value).__qualname__}".encode())
        _encode(tuple(getattr(value, p) for p in value.__props__), out)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} value {value!r} for a digest")
