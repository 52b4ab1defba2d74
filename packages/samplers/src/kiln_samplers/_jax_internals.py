"""The names of JAX outside its stable API that kiln_samplers relies on, with the versions checked.

- The monitoring event of XLA's compile time, ``/jax/core/compile/backend_compile_duration``
  (:data:`COMPILE_EVENT`): the JAX-based NUTS engines report it apart from the
  sampling time. An event name is not API: with a JAX outside :data:`CHECKED` the
  compile time is reported as unknown (None), with one :class:`JaxVersionWarning`,
  rather than as a 0 that would be silently wrong.
"""

from __future__ import annotations

import functools
import warnings

#: The JAX versions (``>= first, < second``, by major and minor) checked.
CHECKED: tuple[tuple[int, int], tuple[int, int]] = ((0, 12), (0, 13))
#: JAX's monitoring event of the seconds XLA spends compiling one computation.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class JaxVersionWarning(UserWarning):
    """The installed JAX is not one kiln_samplers' JAX engines were checked on."""


@functools.cache
def compile_event_known() -> bool:
    """Whether :data:`COMPILE_EVENT` is JAX's name here (a checked version); warns once if not."""
    from importlib.metadata import version as installed  # not at import: 10-30 ms

    version = installed("jax")
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        major = minor = -1
    low, high = CHECKED
    if low <= (major, minor) < high:
        return True
    warnings.warn(
        f"jax {version} is installed; kiln's JAX NUTS engines were checked on "
        f"jax>={low[0]}.{low[1]},<{high[0]}.{high[1]}: XLA's compile time is reported as "
        "unknown (None), sampling is unchanged",
        JaxVersionWarning,
        stacklevel=4,
    )
    return False
