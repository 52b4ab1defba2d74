"""kiln_compile: ``function()``, modes, the config object and the linker registry."""

from kiln_compile._config import Config as Config
from kiln_compile._config import config as config
from kiln_compile._fgraph import FunctionGraph as FunctionGraph
from kiln_compile._function import Function as Function
from kiln_compile._function import function as function
from kiln_compile._function import prepare as prepare
from kiln_compile._linkers import KNOWN_BACKENDS as KNOWN_BACKENDS
from kiln_compile._linkers import BackendNotInstalledError as BackendNotInstalledError
from kiln_compile._linkers import Linker as Linker
from kiln_compile._linkers import available_linkers as available_linkers
from kiln_compile._linkers import get_linker as get_linker
from kiln_compile._mode import FAST_COMPILE as FAST_COMPILE
from kiln_compile._mode import FAST_RUN as FAST_RUN
from kiln_compile._mode import Mode as Mode
from kiln_compile._mode import get_mode as get_mode
from kiln_compile._profile import Profile as Profile
