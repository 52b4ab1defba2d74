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

What is read back is trusted only as far as who could have written it (the trust
model, ``docs/guide.md``, "Who may write the cache?"):

- the root and every folder kiln makes under it are created private (0700), and each
  entry file 0600;
- a root or folder that another user owns, or that its group or others can write, is
  not used at all (one :class:`CacheWarning` that says why and how to fix it), and an
  entry file another user owns or can write is not loaded, as ssh and pip refuse
  unsafe files (:func:`trust_problem`);
- an entry states the key it was written for (a SHA-256 of it in the header): under
  another key it is refused, so a copied entry is never another model's result;
- kiln's own entries are data (:func:`kiln_compile.dumps_data`), never pickles: reading
  one runs no code. Files that are code by nature (shared libraries, Numba's cache)
  are loaded only from folders and files that pass the same checks.

Temporary files are named ``.tmp-<host>-<pid>-...``; those a killed process left
behind are removed by a later one (:func:`sweep_temporaries`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import socket
import stat
import struct
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kiln_compile._config import config
from kiln_graph import KilnValueError

#: Magic bytes, entry format version, payload length, SHA-256 of the payload, SHA-256
#: of the key the entry was written for.
_HEADER = struct.Struct("<8sIQ32s32s")
_MAGIC = b"KILNCACH"
ENTRY_VERSION = 2
_SUFFIX = ".kc"
_TMP_PREFIX = ".tmp-"
#: A temporary file older than this is stale whoever made it (a process on another host).
STALE_TEMPORARY_S = 24 * 3600.0
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

    def usable(self) -> bool:
        """Whether entries may be read here: caching on and the folders trusted."""
        return self.enabled and trusted_folder(self.root, self.directory)

    def get(self, key: str) -> bytes | None:
        """Return the payload stored under ``key``, or ``None`` (a miss).

        A damaged entry, or one written for another key, is deleted and counted in
        ``stats.corrupt``; it is a miss. An entry file that another user owns or can
        write is not read (one :class:`CacheWarning`).
        """
        path = self.path(key)
        if not self.usable():
            return None
        try:
            with open(path, "rb", buffering=0) as f:
                problem = trust_problem(os.fstat(f.fileno()), folder=False)
                # The header and the payload read apart, unbuffered: the payload is read
                # into one buffer of its size (a buffered read joins two copies of it).
                parts = None if problem else (f.read(_HEADER.size), f.readall())
        except OSError:
            self.stats.misses += 1
            return None
        if parts is None:
            _warn_untrusted(path, problem, self.root)
            self.stats.misses += 1
            return None
        payload = _unpack(*parts, key)
        if payload is None:
            self.discard(key)
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return payload

    def put(self, key: str, payload: bytes | Sequence[bytes | memoryview]) -> bool:
        """Store ``payload`` under ``key`` atomically; return whether it was written.

        ``payload`` is bytes, or a sequence of parts stored one after the other (a
        serialized graph's parts: its data is written without being joined in memory).
        A failed write (read-only folder, no permission, disk full) turns the cache
        root off for this process, with one :class:`CacheWarning`.
        """
        path = self.path(key)
        folder = self.folder()
        if folder is None:
            return False
        parts = [payload] if isinstance(payload, bytes | bytearray | memoryview) else payload
        digest = hashlib.sha256()
        for part in parts:
            digest.update(part)
        length = sum(memoryview(part).nbytes for part in parts)
        header = _HEADER.pack(_MAGIC, ENTRY_VERSION, length, digest.digest(), _sha256(key.encode()))
        tmp: Path | None = None
        try:
            fd, name = new_temporary(folder)
            tmp = Path(name)
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                for part in parts:
                    f.write(part)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            self.stats.write_errors += 1
            mark_unwritable(self.root, folder, exc)
            return False
        finally:
            if tmp is not None:
                _remove(tmp)
        self.stats.writes += 1
        return True

    def folder(self, *parts: str, whole_tree: bool = False) -> Path | None:
        """Return the private folder ``<namespace>/<parts...>``, created if needed.

        This is where a backend keeps files of its own (shared libraries, Numba's or
        JAX's cache files). None when caching is off, the root cannot be written, or a
        folder on the way is not trusted (:func:`trust_problem`; one warning); with
        ``whole_tree``, also when any file or folder inside it is not (for files that
        another library writes and reads, such as Numba's own cache). Stale temporary
        files of killed processes are removed from it (once per process).
        """
        if not self.enabled:
            return None
        root = self.root
        target = self.directory.joinpath(*parts)
        if is_unwritable(root) or not trusted_folder(root, target):
            return None
        try:
            make_private_dirs(root, target)
        except OSError as exc:
            mark_unwritable(root, target, exc)
            return None
        if not trusted_folder(root, target):  # made by someone else meanwhile
            return None
        if whole_tree and not _trusted_tree(root, target):
            return None
        sweep_temporaries(target)
        return target

    def discard(self, key: str) -> None:
        """Delete entry ``key`` (found damaged or unusable), counting it as corrupt."""
        self.stats.corrupt += 1
        _remove(self.path(key))


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _unpack(header: bytes, payload: bytes, key: str) -> bytes | None:
    """Return the payload of an entry written for ``key``, or None if damaged or another's."""
    if len(header) < _HEADER.size:
        return None
    magic, version, length, digest, key_digest = _HEADER.unpack_from(header)
    if magic != _MAGIC or version != ENTRY_VERSION or len(payload) != length:
        return None
    if key_digest != _sha256(key.encode()):
        return None
    if _sha256(payload) != digest:
        return None
    return payload


# --- trust: who may have written what is read back --------------------------------------


def trust_problem(status: os.stat_result, *, folder: bool) -> str | None:
    """Return why a file or folder with ``status`` must not be trusted, or None.

    It must be a regular file (or a folder, with ``folder``) that this process's user
    owns and that neither its group nor others can write. On a system without user
    ids (Windows) only the kind is checked.
    """
    kind_ok = stat.S_ISDIR(status.st_mode) if folder else stat.S_ISREG(status.st_mode)
    if not kind_ok:
        return "it is not a folder" if folder else "it is not a regular file"
    uid = _euid()
    if uid is None:
        return None
    if status.st_uid != uid:
        return f"it is owned by user id {status.st_uid}, not by this user (id {uid})"
    writable = status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable:
        who = (
            "its group and others"
            if writable == stat.S_IWGRP | stat.S_IWOTH
            else ("its group" if writable & stat.S_IWGRP else "others")
        )
        return f"{who} can write it (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def _trusted_tree(root: Path, folder: Path) -> bool:
    """Whether every file and folder inside ``folder`` is trusted (one warning if not)."""
    for where, folders, files in os.walk(folder):
        for name in folders:
            path = Path(where) / name
            if not trusted_folder(root, path):
                return False
        for name in files:
            if not trusted_file(Path(where) / name, root):
                return False
    return True


def _euid() -> int | None:
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def trusted_file(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (a file under the cache root ``root``) may be loaded.

    False (with one :class:`CacheWarning` per root) when it is owned by another user
    or others can write it; False with no warning when it does not exist.
    """
    try:
        status = os.stat(path)
    except OSError:
        return False
    problem = trust_problem(status, folder=False)
    if problem is None:
        return True
    _warn_untrusted(Path(path), problem, Path(root))
    return False


# (root, folder) pairs checked in this process, with the problem found (None: trusted).
_checked_folders: dict[tuple[str, str], str | None] = {}
# Roots with an untrusted folder or file, warned about once.
_untrusted_warned: set[str] = set()


def trusted_folder(root: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``root`` and every existing folder from it down to ``folder`` are trusted.

    Folders that do not exist yet are fine (kiln makes them private). The answer is
    kept for the process; an untrusted one gives one :class:`CacheWarning` per root,
    and the cache root is then not used (not read, not written).
    """
    base, target = Path(os.path.expanduser(root)), Path(os.path.expanduser(folder))
    pair = (str(base), str(target))
    if pair in _checked_folders:
        problem = _checked_folders[pair]
    else:
        problem = None
        for path in _chain(base, target):
            try:
                status = os.stat(path)
            except OSError:  # missing, or not reachable: a write will tell
                break
            if not stat.S_ISDIR(status.st_mode):
                break  # a file in the way: the cache cannot be written (a write will tell)
            reason = trust_problem(status, folder=True)
            if reason is not None:
                problem = f"{path}: {reason}"
                break
        if problem is None and not target.exists():
            return True  # not cached: checked again once it exists
        _checked_folders[pair] = problem
    if problem is None:
        return True
    rid = _root_id(base)
    if rid not in _untrusted_warned:
        _untrusted_warned.add(rid)
        warnings.warn(
            f"kiln: not using the cache at {base}: {problem}. Anyone who can write there "
            "could make kiln run their code. Make it yours and private (chmod 700, and "
            "chown it to yourself), or point KILN_CACHE_DIR at a private folder.",
            CacheWarning,
            stacklevel=3,
        )
    return False


def _chain(base: Path, target: Path) -> list[Path]:
    """Return ``base`` and each folder below it down to ``target`` (``[target]`` if not below)."""
    try:
        below = target.relative_to(base).parts
    except ValueError:
        return [target]
    return [base, *(base.joinpath(*below[: i + 1]) for i in range(len(below)))]


def _warn_untrusted(path: Path, problem: str | None, root: Path) -> None:
    rid = f"file:{_root_id(root)}"
    if rid in _untrusted_warned:
        return
    _untrusted_warned.add(rid)
    warnings.warn(
        f"kiln: not loading the cache file {path}: {problem}. kiln writes its cache files "
        "private to you (0600); remove this one (or run `kiln cache clear`).",
        CacheWarning,
        stacklevel=3,
    )


def make_private_dirs(root: str | os.PathLike[str], folder: str | os.PathLike[str]) -> None:
    """Create ``folder`` under the cache ``root`` (and the root), each new folder 0700.

    A new root gets a ``CACHEDIR.TAG`` (backup tools skip it). Missing folders above
    the root (``~/.cache`` on a new account) are made as ``mkdir -p`` makes them: they
    are not kiln's, so they keep the umask's mode.
    """
    base, target = Path(os.path.expanduser(root)), Path(os.path.expanduser(folder))
    if target.is_dir():
        return
    chain = _chain(base, target)
    chain[0].parent.mkdir(parents=True, exist_ok=True)
    fresh = not base.exists() or not any(
        p for p in base.iterdir() if len(chain) < 2 or p.name != chain[1].name
    )
    for path in chain:
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask
    if fresh:
        try:
            fd = os.open(base / _TAG_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        with os.fdopen(fd, "w") as f:
            f.write(_TAG)


# --- temporary files ---------------------------------------------------------------------


def _temporary_prefix() -> str:
    return f"{_TMP_PREFIX}{socket.gethostname()}-{os.getpid()}-"


def new_temporary(folder: str | os.PathLike[str], suffix: str = "") -> tuple[int, str]:
    """Create a private temporary file in ``folder``: return ``(fd, path)`` (``mkstemp``).

    Its name, ``.tmp-<host>-<pid>-...``, lets a later process remove it if this one is
    killed before renaming it into place (:func:`sweep_temporaries`).
    """
    return tempfile.mkstemp(prefix=_temporary_prefix(), suffix=suffix, dir=folder)


def new_temporary_folder(folder: str | os.PathLike[str]) -> str:
    """Create a private temporary folder in ``folder`` (named as :func:`new_temporary`)."""
    return tempfile.mkdtemp(prefix=_temporary_prefix(), dir=folder)


_TEMPORARY = re.compile(r"^\.tmp-(?P<host>[^/]*)-(?P<pid>\d+)-")
_swept: set[str] = set()


def sweep_temporaries(folder: str | os.PathLike[str], *, force: bool = False) -> int:
    """Remove the temporary files and folders that killed processes left in ``folder``.

    One is stale when the process named in it is gone (same host), or when it is older
    than :data:`STALE_TEMPORARY_S`. Runs once per folder per process unless ``force``;
    returns how many were removed.
    """
    key = str(folder)
    if key in _swept and not force:
        return 0
    _swept.add(key)
    removed = 0
    host = socket.gethostname()
    now = time.time()
    try:
        children = list(os.scandir(folder))
    except OSError:
        return 0
    for child in children:
        if not child.name.startswith(_TMP_PREFIX):
            continue
        match = _TEMPORARY.match(child.name)
        try:
            old = now - child.stat(follow_symlinks=False).st_mtime > STALE_TEMPORARY_S
        except OSError:
            continue
        dead = match is not None and match["host"] == host and not _alive(int(match["pid"]))
        if not (old or dead):
            continue
        if child.is_dir(follow_symlinks=False):
            shutil.rmtree(child.path, ignore_errors=True)
        else:
            _remove(Path(child.path))
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid() or os.name != "posix":
        return True  # (on Windows os.kill would end the process: only age tells there)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


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
    _checked_folders.clear()
    _swept.clear()
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
