"""kiln's on-disk caches: see where they are, how big they are, and empty them.

One cache root (``KILN_CACHE_DIR`` or ``~/.cache/kiln``; ``kiln.config.cache_dir``)
with one folder per cache: ``stage1`` (rewritten graphs) and one per backend. The
same from a shell: ``kiln cache info`` and ``kiln cache clear``.

Examples
--------
>>> import kiln
>>> report = kiln.cache.info()
>>> sorted(report)
['bytes', 'entries', 'namespaces', 'root']
"""

from kiln_compile import CacheStats as CacheStats
from kiln_compile import CacheWarning as CacheWarning
from kiln_compile import DiskCache as DiskCache
from kiln_compile import cache_info as info
from kiln_compile import cache_stats as stats
from kiln_compile import clear_cache as clear
from kiln_compile import format_cache_info as format_info

__all__ = ["CacheStats", "CacheWarning", "DiskCache", "clear", "format_info", "info", "stats"]
