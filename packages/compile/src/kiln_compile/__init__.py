"""kiln_compile: ``function()``, modes, the config object, the linker registry, caches."""

from kiln_compile._cache import CacheStats as CacheStats
from kiln_compile._cache import CacheWarning as CacheWarning
from kiln_compile._cache import DiskCache as DiskCache
from kiln_compile._cache import cache_info as cache_info
from kiln_compile._cache import cache_stats as cache_stats
from kiln_compile._cache import clear_cache as clear_cache
from kiln_compile._cache import format_cache_info as format_cache_info
from kiln_compile._cache import is_unwritable as is_unwritable
from kiln_compile._cache import mark_unwritable as mark_unwritable
from kiln_compile._config import Config as Config
from kiln_compile._config import config as config
from kiln_compile._fgraph import FunctionGraph as FunctionGraph
from kiln_compile._function import Function as Function
from kiln_compile._function import function as function
from kiln_compile._function import linker_name_of as linker_name_of
from kiln_compile._function import prepare as prepare
from kiln_compile._function import rewrite_cached as rewrite_cached
from kiln_compile._function import thread_generators as thread_generators
from kiln_compile._linkers import KNOWN_BACKENDS as KNOWN_BACKENDS
from kiln_compile._linkers import BackendNotInstalledError as BackendNotInstalledError
from kiln_compile._linkers import Linker as Linker
from kiln_compile._linkers import LinkerDoc as LinkerDoc
from kiln_compile._linkers import available_linkers as available_linkers
from kiln_compile._linkers import get_linker as get_linker
from kiln_compile._memo import clear as clear_function_memo  # noqa: F401
from kiln_compile._memo import stats as function_memo_stats  # noqa: F401
from kiln_compile._mode import FAST_COMPILE as FAST_COMPILE
from kiln_compile._mode import FAST_RUN as FAST_RUN
from kiln_compile._mode import Mode as Mode
from kiln_compile._mode import get_mode as get_mode
from kiln_compile._profile import Profile as Profile
from kiln_compile._serialize import CorruptGraphError as CorruptGraphError
from kiln_compile._serialize import GraphNotSerializableError as GraphNotSerializableError
from kiln_compile._serialize import dumps_graph as dumps_graph
from kiln_compile._serialize import loads_graph as loads_graph
from kiln_compile._stage1 import STAGE1 as STAGE1
from kiln_compile._stage1 import stage1_key as stage1_key
