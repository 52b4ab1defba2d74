"""Exception types raised by kiln_graph."""


class KilnError(Exception):
    """Base class of kiln errors."""


class KilnTypeError(KilnError, TypeError):
    """A value or variable has the wrong dtype, number of dimensions or shape."""


class KilnValueError(KilnError, ValueError):
    """An argument has the right type but an invalid value (axis, shape, ...)."""


class ShapeMismatchError(KilnValueError):
    """Shapes cannot be broadcast or do not match what an Op requires."""


class DisconnectedInputError(KilnValueError):
    """``grad`` was asked for the gradient with respect to a variable the cost does not use."""


class GradientError(KilnValueError):
    """A gradient is undefined or was requested for an invalid cost."""


class KilnIndexError(KilnError, IndexError):
    """An index is out of bounds, or an indexing expression has too many indices."""
