"""Stage 2 on disk: MLX's compiled CPU kernels, under kiln's cache root.

``mx.compile`` on the CPU writes each fused kernel as C++ source, compiles it with the
system's C++ compiler into a shared library, and loads it; a later process finds the
library by its file name and loads it without compiling. MLX puts these files in
``$TMPDIR/mlx/<MLX version>/cpu``, reading ``TMPDIR`` each time it writes or looks for a
kernel (checked on MLX 0.32). kiln points that at ``<cache root>/mlx`` by setting
``TMPDIR`` to that folder for the duration of each call of a compiled function
(:func:`kernel_scope`), and restores it after; kernels then live in
``<cache root>/mlx/mlx/<MLX version>/cpu``. With ``config.cache`` off, or a cache root
that cannot be written (one :class:`~kiln_compile.CacheWarning`), MLX keeps its
default place. The folder is private (0700), like every folder of the cache root.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from kiln_compile import DiskCache, config, mark_unwritable, new_temporary

_NAMESPACE = "mlx"


def kernel_folder() -> str | None:
    """Return ``<kiln cache root>/mlx`` (created private), or None where it cannot be used.

    Examples
    --------
    >>> kernel_folder()  # doctest: +SKIP
    '/home/me/.cache/kiln/mlx'
    """
    if not config.cache:
        return None
    cache = DiskCache(_NAMESPACE)
    target = cache.folder()
    if target is None:
        return None
    try:
        fd, name = new_temporary(Path(target))
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        mark_unwritable(cache.root, target, exc)
        return None
    return str(target)


@contextlib.contextmanager
def kernel_scope(folder: str | None) -> Iterator[None]:
    """Within the context, MLX writes and finds its compiled kernels under ``folder``."""
    if folder is None:
        yield
        return
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = folder
    try:
        yield
    finally:
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before
