"""Every name of JAX outside its stable API that kiln_jax uses, with the versions checked.

- ``jax.experimental.compilation_cache.compilation_cache.reset_cache``: JAX decides once
  per process whether its persistent compilation cache is in use; kiln points the cache
  at its own root after that decision may have been made, and resets it
  (:func:`reset_compilation_cache`).

They were read on the JAX versions of :data:`CHECKED` (``pyproject.toml`` bounds JAX the
same way). With another version, or when the name is missing, one
:class:`JaxVersionWarning` says so and kiln_jax does without: the persistent cache is
then used only by functions compiled after kiln set its directory (the first compile of
a process may miss it). Nothing else changes.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import warnings

#: The JAX versions (``>= first, < second``, by major and minor) checked.
CHECKED: tuple[tuple[int, int], tuple[int, int]] = ((0, 12), (0, 13))


class JaxVersionWarning(UserWarning):
    """The installed JAX is not one kiln_jax's use of JAX internals was checked on."""


def version_problem(version: str) -> str | None:
    """Return why JAX ``version`` is outside :data:`CHECKED`, or None if inside."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return f"jax {version!r} has a version kiln_jax cannot read"
    low, high = CHECKED
    if low <= (major, minor) < high:
        return None
    return (
        f"jax {version} is installed; kiln_jax was checked on "
        f"jax>={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    )


@functools.cache
def _reset_cache() -> object | None:
    """Return JAX's ``reset_cache``, or None (one warning) where it is not usable."""
    reason = version_problem(importlib.metadata.version("jax"))
    reset = None
    if reason is None:
        try:
            module = importlib.import_module("jax.experimental.compilation_cache.compilation_cache")
            reset = getattr(module, "reset_cache", None)
        except ImportError:
            pass
        if reset is None:
            reason = "this JAX has no compilation_cache.reset_cache"
    if reason is not None:
        warnings.warn(
            f"{reason}: kiln's JAX compilation cache is used only by functions compiled "
            "after kiln set its directory (results are unchanged)",
            JaxVersionWarning,
            stacklevel=4,
        )
    return reset


def reset_compilation_cache() -> bool:
    """Make JAX decide again whether it uses its persistent cache; False where it cannot."""
    reset = _reset_cache()
    if reset is None:
        return False
    reset()  # type: ignore[operator]
    return True
