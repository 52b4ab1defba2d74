"""The version ranges kiln_samplers' compatibility modules (``*_internals``) state."""

from __future__ import annotations

#: ``(lowest, first not checked)``: versions ``>= lowest, < first not checked``.
Range = tuple[tuple[int, ...], tuple[int, ...]]


def within(version: str, checked: Range) -> bool:
    """Whether ``version`` (``"0.16.11"``) is in the range ``checked``.

    Parts past the range's precision are ignored; a version whose leading parts are not
    numbers (``"dev"``) is not in it.
    """
    try:
        parsed = tuple(int(part) for part in version.split(".")[: len(checked[0])])
    except ValueError:
        return False
    return checked[0] <= parsed < checked[1]


def requirement(name: str, checked: Range) -> str:
    """Return ``checked`` as a pip requirement of ``name`` (``nutpie>=0.16.11,<0.17``)."""
    low, high = (".".join(map(str, v)) for v in checked)
    return f"{name}>={low},<{high}"
