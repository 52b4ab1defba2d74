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

from kiln_samplers._version_range import Range, requirement, within

#: The JAX versions (``>= first, < second``, by major and minor) checked.
CHECKED: Range = ((0, 12), (0, 13))
#: JAX's monitoring event of the seconds XLA spends compiling one computation.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class JaxVersionWarning(UserWarning):
    """The installed JAX is not one kiln_samplers' JAX engines were checked on."""


@functools.cache
def compile_event_known() -> bool:
    """Whether :data:`COMPILE_EVENT` is JAX's name here (a checked version); warns once if not."""
    from importlib.metadata import version as installed  # not at import: 10-30 ms

    version = installed("jax")
    if within(version, CHECKED):
        return True
    warnings.warn(
        f"jax {version} is installed; kiln's JAX NUTS engines were checked on "
        f"{requirement('jax', CHECKED)}: XLA's compile time is reported as "
        "unknown (None), sampling is unchanged",
        JaxVersionWarning,
        stacklevel=4,
    )
    return False
