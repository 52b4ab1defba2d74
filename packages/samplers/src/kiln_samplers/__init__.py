"""kiln_samplers: samplers over the compiled-model protocol (no graphs here).

kiln's NUTS (:func:`sample_nuts`): multinomial trajectories with the generalized
no-U-turn criterion, Stan's windowed warm-up (diagonal mass matrix, dual-averaging
step size), chains in parallel threads. Its transitions run in one compiled kernel (C,
or Numba's without a C compiler) when the model brings a native log-density
(:class:`NativePointers`: the C ABI of ``kiln_compile.NativeModel``), in Python
otherwise. Results become ArviZ data with :func:`to_datatree`.

Gradient-free step methods over entries of the flat vector (:class:`Metropolis`,
:class:`Slice`, :class:`DEMetropolis`, :class:`DEMetropolisZ`, :class:`BinaryMetropolis`,
:class:`CategoricalGibbsMetropolis`), NUTS as a step, and :class:`CompoundStep` run
with :func:`sample_steps`.
"""

from kiln_samplers._c_nuts import ArtifactStore as ArtifactStore
from kiln_samplers._c_nuts import use_kernel_store as use_kernel_store
from kiln_samplers._compound import NUTS as NUTS
from kiln_samplers._compound import CompoundStep as CompoundStep
from kiln_samplers._compound import StepChainResult as StepChainResult
from kiln_samplers._compound import bind_steps as bind_steps
from kiln_samplers._compound import run_step_chains as run_step_chains
from kiln_samplers._compound import sample_steps as sample_steps
from kiln_samplers._compound import trace_from_step_chains as trace_from_step_chains
from kiln_samplers._demetropolis import DEMetropolis as DEMetropolis
from kiln_samplers._demetropolis import DEMetropolisZ as DEMetropolisZ
from kiln_samplers._discrete_steps import BinaryMetropolis as BinaryMetropolis
from kiln_samplers._discrete_steps import CategoricalGibbsMetropolis as CategoricalGibbsMetropolis
from kiln_samplers._jax_nuts import sample_blackjax as sample_blackjax
from kiln_samplers._jax_nuts import sample_numpyro as sample_numpyro
from kiln_samplers._nutpie import SUPPORTED_NUTPIE_VERSIONS as SUPPORTED_NUTPIE_VERSIONS
from kiln_samplers._nutpie import import_nutpie as import_nutpie
from kiln_samplers._nutpie import nutpie_options as nutpie_options
from kiln_samplers._nutpie import nutpie_private_api as nutpie_private_api
from kiln_samplers._nutpie import sample_nutpie as sample_nutpie
from kiln_samplers._nutpie_internals import NutpieVersionWarning as NutpieVersionWarning
from kiln_samplers._nuts import init_chain as init_chain
from kiln_samplers._nuts import prefetch_native_kernel as prefetch_native_kernel
from kiln_samplers._nuts import run_chain as run_chain
from kiln_samplers._nuts_settings import STAT_NAMES as STAT_NAMES
from kiln_samplers._nuts_settings import ChainResult as ChainResult
from kiln_samplers._nuts_settings import ChainState as ChainState
from kiln_samplers._nuts_settings import NutsSettings as NutsSettings
from kiln_samplers._progress import Progress as Progress
from kiln_samplers._progress import progress_bar as progress_bar
from kiln_samplers._protocol import CompiledModel as CompiledModel
from kiln_samplers._protocol import NativePointers as NativePointers
from kiln_samplers._results import SamplingWarning as SamplingWarning
from kiln_samplers._results import SlowPathWarning as SlowPathWarning
from kiln_samplers._results import check_diagnostics as check_diagnostics
from kiln_samplers._results import start_check_diagnostics as start_check_diagnostics
from kiln_samplers._results import to_datatree as to_datatree
from kiln_samplers._sample import SamplingInterrupted as SamplingInterrupted
from kiln_samplers._sample import Trace as Trace
from kiln_samplers._sample import chain_seeds as chain_seeds
from kiln_samplers._sample import map_draws as map_draws
from kiln_samplers._sample import sample_nuts as sample_nuts
from kiln_samplers._sample import trace_from_chain_traces as trace_from_chain_traces
from kiln_samplers._sample import trace_from_chains as trace_from_chains
from kiln_samplers._sample import warn_interrupted as warn_interrupted
from kiln_samplers._steps import Metropolis as Metropolis
from kiln_samplers._steps import Slice as Slice
from kiln_samplers._steps import Step as Step
from kiln_samplers._steps import StepContext as StepContext
