"""Stage 2 on disk: inductor's cache (``torch.compile``), under kiln's cache root.

Eager execution keeps nothing on disk. With ``config.torch_compile`` on, inductor
writes its compiled kernels and FX-graph cache to ``TORCHINDUCTOR_CACHE_DIR`` (and
Triton, on a GPU, to ``TRITON_CACHE_DIR``): kiln points both at ``<cache root>/torch``
the first time a function is compiled, unless the user set them already (those are
kept), so a new process reuses the compiled code. With ``config.cache`` off nothing is
changed; a cache root that cannot be written (or that another user can write) gives
one :class:`~kiln_compile.CacheWarning` and inductor keeps its default folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from kiln_compile import DiskCache, config, mark_unwritable, new_temporary

_NAMESPACE = "torch"
_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _probe(directory: Path) -> None:
    """Raise OSError unless a file can be created in ``directory``."""
    fd, name = new_temporary(directory)
    os.close(fd)
    os.unlink(name)


def enable_inductor_cache() -> str | None:
    """Point inductor's (and Triton's) cache at ``<kiln cache root>/torch``.

    A folder the user set (``TORCHINDUCTOR_CACHE_DIR``) is kept. Returns the folder
    inductor uses, or None when kiln sets none (``config.cache`` off, or the cache root
    cannot be written: one ``CacheWarning`` then).

    Examples
    --------
    >>> enable_inductor_cache()  # doctest: +SKIP
    '/home/me/.cache/kiln/torch'
    """
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current:
        return current
    if not config.cache:
        return None
    cache = DiskCache(_NAMESPACE)
    target = cache.folder()  # private (0700), and None if someone else can write there
    if target is None:
        return None
    try:
        _probe(target)
    except OSError as exc:
        mark_unwritable(cache.root, target, exc)
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(target / "inductor")
    os.environ.setdefault("TRITON_CACHE_DIR", str(target / "triton"))
    return str(target / "inductor")
