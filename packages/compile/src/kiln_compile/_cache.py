"""The on-disk cache: one root, one folder per namespace, checked atomic entries.

Every cache kiln keeps on disk goes through :class:`DiskCache`: the Stage-1 cache of
rewritten graphs (namespace ``stage1``) and the backends' Stage-2 artefacts (``numba``,
``c``, ...). The root is ``config.cache_dir`` (``KILN_CACHE_DIR`` or ``~/.cache/kiln``).

An entry is one file ``<root>/<namespace>/<key>.kc``, keyed by a hex digest. It starts
with a header (magic, entry format version, payload length, SHA-256 of the payload), so
a truncated, partly written or corrupted entry is detected, deleted and reported as a
miss. Writes go to a temporary file in the same folder, then ``os.replace`` renames it
into place: readers see the old entry or the new one, never half of one, and two
processes writing the same key at once both succeed. A cache that cannot be written
(read-only folder, permission denied, disk full) turns into no cache with one warning.

Entries are trusted code: Stage 1 stores pickles. Do not point ``KILN_CACHE_DIR`` at a
folder that others can write.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import struct
import tempfile
import warnings
from pathlib import Path
from typing import Any

from kiln_compile._config import config
from kiln_graph import KilnValueError

#: Magic bytes, entry format version, payload length, SHA-256 of the payload.
_HEADER = struct.Struct("<8sIQ32s")
_MAGIC = b"KILNCACH"
ENTRY_VERSION = 1
_SUFFIX = ".kc"
_TMP_PREFIX = ".tmp-"
_KEY = re.compile(r"^[0-9a-f]{16,128}$")
_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")
_TAG_NAME = "CACHEDIR.TAG"
_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by kiln (https://bford.info/cachedir/).\n"
    "# `kiln cache clear` empties this folder.\n"
)


class CacheWarning(UserWarning):
    """The on-disk cache cannot be used (it is then skipped, with one warning)."""


@dataclasses.dataclass
class CacheStats:
    """Counters of one namespace in this process.

    ``corrupt`` counts entries found damaged (and deleted); ``write_errors`` counts
    writes that failed (the first one turns the cache off with a warning).
    """

    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    writes: int = 0
    write_errors: int = 0


_stats: dict[str, CacheStats] = {}
# Roots that failed a write in this process: no more writes there, no more warnings.
_unwritable: set[str] = set()


def _root() -> Path:
    return Path(os.path.expanduser(config.cache_dir))


class DiskCache:
    """Entries of one namespace under the cache root: ``get(key)`` and ``put(key, data)``.

    Parameters
    ----------
    namespace
        The sub-folder (``"stage1"``, ``"numba"``...): lowercase letters, digits, ``_``, ``-``.
    root
        The cache root; by default ``config.cache_dir``, read at each call.

    Examples
    --------
    >>> cache = DiskCache("stage1")  # doctest: +SKIP
    >>> cache.put("ab12" * 16, b"payload")  # doctest: +SKIP
    >>> cache.get("ab12" * 16)  # doctest: +SKIP
    b'payload'
    """

    def __init__(self, namespace: str, root: str | os.PathLike[str] | None = None) -> None:
        if not _NAMESPACE.match(namespace):
            raise KilnValueError(
                f"namespace: expected lowercase letters, digits, '_' or '-', got {namespace!r}"
            )
        self.namespace = namespace
        self._root = None if root is None else Path(root)
        self.stats = _stats.setdefault(namespace, CacheStats())

    @property
    def root(self) -> Path:
        """The cache root this namespace lives under."""
        return self._root if self._root is not None else _root()

    @property
    def directory(self) -> Path:
        """The folder holding this namespace's entries."""
        return self.root / self.namespace

    @property
    def enabled(self) -> bool:
        """Whether caching is on (``config.cache``)."""
        return bool(config.cache)

    def path(self, key: str) -> Path:
        """Return the file of entry ``key`` (which must be a lowercase hex digest)."""
        if not isinstance(key, str) or not _KEY.match(key):
            raise KilnValueError(f"key: expected a lowercase hex digest, got {key!r}")
        return self.directory / (key + _SUFFIX)

    def get(self, key: str) -> bytes | None:
        """Return the payload stored under ``key``, or ``None`` (a miss).

        A damaged entry is deleted and counted in ``stats.corrupt``; it is a miss.
        """
        path = self.path(key)
        if not self.enabled:
            return None
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except OSError:
            self.stats.misses += 1
            return None
        payload = _unpack(blob)
        if payload is None:
            self.discard(key)
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return payload

    def put(self, key: str, payload: bytes) -> bool:
        """Store ``payload`` under ``key`` atomically; return whether it was written.

        A failed write (read-only folder, no permission, disk full) turns the cache
        root off for this process, with one :class:`CacheWarning`.
        """
        path = self.path(key)
        root = self.root
        if not self.enabled or is_unwritable(root):
            return False
        header = _HEADER.pack(_MAGIC, ENTRY_VERSION, len(payload), hashlib.sha256(payload).digest())
        tmp: str | None = None
        try:
            _make_dirs(root, self.directory)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(payload)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            self.stats.write_errors += 1
            mark_unwritable(root, self.directory, exc)
            return False
        finally:
            if tmp is not None:
                _remove(Path(tmp))
        self.stats.writes += 1
        return True

    def discard(self, key: str) -> None:
        """Delete entry ``key`` (found damaged or unusable), counting it as corrupt."""
        self.stats.corrupt += 1
        _remove(self.path(key))


def _unpack(blob: bytes) -> bytes | None:
    """Return the payload of an entry, or ``None`` if it is damaged or of another format."""
    if len(blob) < _HEADER.size:
        return None
    magic, version, length, digest = _HEADER.unpack_from(blob)
    if magic != _MAGIC or version != ENTRY_VERSION or len(blob) - _HEADER.size != length:
        return None
    payload = blob[_HEADER.size :]
    if hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _make_dirs(root: Path, directory: Path) -> None:
    if directory.is_dir():
        return
    fresh = not root.exists()
    directory.mkdir(parents=True, exist_ok=True)
    if fresh or not any(p for p in root.iterdir() if p.name != directory.name):
        tag = root / _TAG_NAME
        if not tag.exists():
            tag.write_text(_TAG)


def _root_id(root: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.expanduser(root))


def is_unwritable(root: str | os.PathLike[str]) -> bool:
    """Whether a write under the cache root ``root`` failed in this process."""
    return _root_id(root) in _unwritable


def mark_unwritable(
    root: str | os.PathLike[str], directory: str | os.PathLike[str], exc: OSError
) -> None:
    """Record that ``directory`` under the cache root ``root`` cannot be written.

    Every cache under that root (Stage 1 and the backends' Stage-2 artefacts) then
    stops writing there for this process; the first call warns (one
    :class:`CacheWarning` per root), later ones are silent.
    """
    rid = _root_id(root)
    if rid in _unwritable:
        return
    _unwritable.add(rid)
    warnings.warn(
        f"kiln: cannot write the cache folder {directory} ({exc}); continuing "
        "without the on-disk cache. Point KILN_CACHE_DIR at a writable folder, or "
        "turn caching off with KILN_FLAGS=cache=false.",
        CacheWarning,
        stacklevel=3,
    )


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _is_tagged(root: Path) -> bool:
    try:
        return (root / _TAG_NAME).read_text().startswith(_TAG.split("\n", 1)[0])
    except OSError:
        return False


def clear_cache(root: str | os.PathLike[str] | None = None) -> int:
    """Delete every cached entry under the cache root, all namespaces; return how many.

    A root kiln created (it holds kiln's ``CACHEDIR.TAG``) is emptied entirely, the
    backends' own artefacts included; in any other folder only kiln's entry files are
    deleted.

    Examples
    --------
    >>> kiln.cache.clear()  # doctest: +SKIP
    12
    """
    base = Path(root) if root is not None else _root()
    if not base.is_dir():
        return 0
    removed = 0
    tagged = _is_tagged(base)
    for child in base.iterdir():
        if child.name == _TAG_NAME or not child.is_dir() or child.is_symlink():
            continue
        if tagged:
            removed += sum(1 for p in child.rglob("*") if p.is_file())
            shutil.rmtree(child, ignore_errors=True)
            continue
        for p in child.iterdir():
            if p.is_file() and (p.name.endswith(_SUFFIX) or p.name.startswith(_TMP_PREFIX)):
                _remove(p)
                removed += 1
        try:
            child.rmdir()
        except OSError:
            pass
    _unwritable.discard(_root_id(base))
    return removed


def cache_info(root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Return the cache root and, per namespace, its number of entries and bytes.

    Examples
    --------
    >>> kiln.cache.info()  # doctest: +SKIP
    {'root': '/home/me/.cache/kiln', 'entries': 3, 'bytes': 5123,
     'namespaces': {'stage1': {'entries': 3, 'bytes': 5123}}}
    """
    base = Path(root) if root is not None else _root()
    namespaces: dict[str, dict[str, int]] = {}
    if base.is_dir():
        for child in sorted(base.iterdir()):
            if not child.is_dir() or child.is_symlink():
                continue
            files = [p for p in child.rglob("*") if p.is_file()]
            entries = [p for p in files if not p.name.startswith(_TMP_PREFIX)]
            namespaces[child.name] = {
                "entries": len(entries),
                "bytes": sum(_size(p) for p in files),
            }
    return {
        "root": str(base),
        "entries": sum(n["entries"] for n in namespaces.values()),
        "bytes": sum(n["bytes"] for n in namespaces.values()),
        "namespaces": namespaces,
    }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def format_cache_info(report: dict[str, Any]) -> str:
    """Return :func:`cache_info`'s report as a small table."""
    lines = [f"kiln cache: {report['root']}"]
    for name, ns in report["namespaces"].items():
        lines.append(f"  {name:<12} {ns['entries']:8d} entries  {_human(ns['bytes']):>10}")
    lines.append(f"  {'total':<12} {report['entries']:8d} entries  {_human(report['bytes']):>10}")
    return "\n".join(lines)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def cache_stats() -> dict[str, CacheStats]:
    """Return this process's hit / miss / corrupt / write counters, per namespace."""
    return dict(_stats)
