"""Everything that crosses the Numba boundary, defined once (docs/design.md, "The Numba
boundary").

Inputs: three ``typing.NamedTuple`` records carry one lowered problem: ``KernelTable`` (one
read-only numpy array per per-kernel quantity, indexed by the kernel's position in
``spec.graph.kernels``), ``EdgeTable`` (the same per edge, in ``GraphStructure`` order) and
``Constants`` (typed scalars of the system and the outer choices). ``cost.lower.lower``
writes them; the jitted code takes them as arguments. Numba passes a NamedTuple as one
argument and resolves ``table.field`` at compile time, so a field costs nothing to read.
Field types must not vary between problems (every array keeps its dtype and read-only flag,
every scalar its Python type), else Numba compiles another specialisation.

Outputs and work arrays: the float64 arrays the jitted code writes are indexed by one
``IntEnum`` per array family: ``ConfigCol`` and ``ResultSlot`` (the evaluator), ``SetSlot``
(``set_cost``), ``BoundCol`` (``bound_terms``), ``Stat`` (a search's statistics) and
``Control`` (deadline, budget and stop flag of a search).

Importing this module does not import numba.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

__all__ = [
    "KernelTable",
    "EdgeTable",
    "Constants",
    "ConfigCol",
    "ResultSlot",
    "SetSlot",
    "BoundCol",
    "NUM_CFG",
    "NUM_RES",
    "NUM_SET",
    "NUM_BND",
    "Stat",
    "Control",
    "NUM_STATS",
    "NUM_CONTROL",
    "new_stats",
    "no_control",
]


class KernelTable(NamedTuple):
    """Per-kernel arrays, length n (kernel k = ``spec.graph.kernels[k]``).

    Per-tile quantities are for one tile of the kernel's tiled dimension on one chip.
    """

    a: np.ndarray  #: int64, ceil(sM / W): lane work units (cycle model)
    b: np.ndarray  #: int64, stage work units: ceil(sN / H), ceil(sK / effective stage), 1 (SIMD)
    z: np.ndarray  #: int64, cycles per (lane, stage) unit: sK or sN, x num_input in v1
    compute_ns: np.ndarray  #: float64, FLOP-model compute ns per tile (0 in the cycle model)
    weight_sram: np.ndarray  #: float64, weight bytes in SRAM before weight tiling (0: none)
    is_weight: np.ndarray  #: int64 0/1, a GEMM with a resident weight
    memory_bytes: np.ndarray  #: float64, DRAM bytes per graph execution (memory_size)
    net_tile_ns: np.ndarray  #: float64, network ns per tile (the kernel's collective)
    net_once_ns: np.ndarray  #: float64, network ns per execution, not x T (periodic all-reduce)
    #: float64 (n, max(3, network dimensions)), all-to-all / broadcast ns per channel (max taken)
    channel_ns: np.ndarray
    all_reduce: np.ndarray  #: int64 0/1, an all-reduce of > 0 bytes (link latency count)
    phase: np.ndarray  #: int64, ``codes.Phase`` value
    pin: np.ndarray  #: int64, pinned configuration, -1 = free
    num_input: np.ndarray  #: int64, num_input of the kernel, 0 = unset
    sram_extra: np.ndarray  #: float64, extra SRAM bytes (sram_extra_bytes)


class EdgeTable(NamedTuple):
    """Per-edge arrays, length E (``GraphStructure`` order of the connections)."""

    src: np.ndarray  #: int64, producing kernel
    dst: np.ndarray  #: int64, consuming kernel
    buffer_bytes: np.ndarray  #: float64, buffer bytes per chip per tile (0 for zero_out edges)
    sram_bytes: np.ndarray  #: float64, bytes counted in the SRAM footprint
    sram_depth: np.ndarray  #: int64, buffer depth counted in the SRAM footprint
    net_tile_ns: np.ndarray  #: float64, network ns per tile of the edge's re-layout collective
    all_reduce: np.ndarray  #: int64 0/1, an all-reduce on the edge (link latency count)


class Constants(NamedTuple):
    """System and outer-choice constants of one problem (typed scalars).

    float fields are Python floats, int fields Python ints, flags Python bools; ``lower``
    writes them with these types (see the module docstring).
    """

    freq_GHz: float  #: core clock, cycles per ns
    sram_cap: float  #: SRAM bytes per chip, inf = unlimited
    dram_cap: float  #: DRAM bytes per chip (first tier), inf = unlimited
    dram_bw: float  #: GB/s = bytes per ns of the first tier
    dram2_bw: float  #: GB/s of the second tier (0: no second tier)
    dram2_cap: float  #: bytes of the second tier, 0 = no second tier
    dram_fixed: float  #: DRAM bytes that do not depend on the assignment (weights, tables)
    dram_act_mult: float  #: multiplier of the widest live activations in the DRAM total
    ar_latency_ns: float  #: ns added per all-reduce of a configuration (link latency)
    batch_mult: float  #: ns_per_batch = all_config_ii * batch_mult + p2p_ns
    p2p_ns: float  #: pipeline point-to-point ns per batch
    num_copy: float  #: workload copies: final_ns = ns_per_batch / num_copy
    num_tile: int  #: T, tiles of the tiled dimension
    num_config: int  #: C, configurations
    cores: int  #: cores per chip
    overlap: int  #: ``codes.Overlap`` value
    fb_last_fwd: int  #: FWD kernels sit in configurations <= this (FWD/BWD rule)
    fb_first_bwd: int  #: BWD kernels sit in configurations >= this (FWD/BWD rule)
    cycle_model: bool  #: compute_util == 0: cycles and core allocation, not FLOP
    sram_check: bool  #: the SRAM capacity is checked
    tf_divides: bool  #: v2: the weight tiling factor must divide the weight bytes
    per_config_tiles: bool  #: v2: T_c = 1 in configurations holding a num_input kernel
    ii_num_input: bool  #: v2: II(c) is multiplied by the largest num_input in c
    fb_rule: bool  #: the FWD/BWD split rule applies
    num_input_mixed: bool  #: some kernels set num_input and some do not
    fixed_config: bool  #: configuration k holds kernel k (kernel by kernel, C = n)
    sparse: bool  #: some kernel has channel, per-execution, memory or extra SRAM terms


# ---- output layouts of the jitted code (float64 arrays, columns named by IntEnums) --------
class ConfigCol(enum.IntEnum):
    """Columns of the evaluator's per-configuration output ``cfg`` (one row per configuration)."""

    COMPUTE = 0  #: compute ns (T_c x per-tile time)
    MEMORY = 1  #: memory ns
    NETWORK = 2  #: network ns
    II = 3  #: initiation interval, ns (``combine_overlap`` of the three, x num_input in v2)
    SRAM = 4  #: SRAM bytes (after weight tiling)
    TILES = 5  #: T_c
    CYCLES = 6  #: cycles of the slowest kernel (cycle model)


NUM_CFG = len(ConfigCol)


class ResultSlot(enum.IntEnum):
    """Slots of the evaluator's whole-assignment output ``res``."""

    FINAL = 0  #: final_ns = ns_per_batch / copies
    BATCH = 1  #: ns_per_batch
    ALL_II = 2  #: sum of the configurations' IIs, ns
    DRAM = 3  #: DRAM bytes per chip
    DRAM_BW = 4  #: DRAM bandwidth in effect, GB/s
    VIOLATION = 5  #: amount by which the binding constraint is violated, in its unit


NUM_RES = len(ResultSlot)


class SetSlot(enum.IntEnum):
    """Slots of ``evaluate.set_cost``'s output ``out`` (one configuration)."""

    II = 0  #: II of the configuration, ns (inf if infeasible)
    SRAM = 1  #: SRAM bytes
    LIVE = 2  #: T_c x live activation bytes
    STATUS = 3  #: ``codes.Status`` value
    VIOLATION = 4  #: amount by which the binding constraint is violated, in its unit
    HIDDEN = 5  #: 1 when an SRAM rejection might be due to an untiled read-side footprint


NUM_SET = len(SetSlot)


class BoundCol(enum.IntEnum):
    """Columns of ``evaluate.bound_terms``' per-kernel lower-bound terms (n rows)."""

    TC = 0  #: compute ns, additive over kernels
    FLOOR = 1  #: compute ns of the kernel alone on every core (a maximum, not a sum)
    TM = 2  #: memory ns of the kernel's own DRAM bytes
    TN = 3  #: network ns of the kernel and of its out-edges
    CH0 = 4  #: channel 0 ns
    CH1 = 5  #: channel 1 ns
    CH2 = 6  #: channel 2 ns; a network of more than 3 dimensions adds a column per dimension


NUM_BND = len(BoundCol)


# ---- work arrays of the jitted searches ---------------------------------------------------
class Stat(enum.IntEnum):
    """Slots of a search's stats array (float64, written by the jitted searches of
    ``search/_dp.py``, read by ``search/assign.py``)."""

    EVALS = 0  #: ``set_cost`` calls (the work budget counts these)
    OVERFLOW = 1  #: 1 when a state or queue budget was exceeded: not proven optimal
    HIDDEN = 2  #: 1 when a rejection might be due to an untiled read-side footprint
    STATES = 3  #: states created by ``ideal_search``
    QUEUE = 4  #: entries queued by ``ideal_search``
    STOPPED = 5  #: 1 when the control array stopped the search (see ``must_stop``)
    VIOL_SRAM = 6  #: smallest SRAM violation seen, bytes (inf: none); VIOL_* stay last
    VIOL_DRAM = 7  #: smallest DRAM violation seen, bytes
    VIOL_CORES = 8  #: smallest core shortfall seen
    VIOL_CONFIG = 9  #: smallest configuration-rule violation seen


NUM_STATS = len(Stat)


class Control(enum.IntEnum):
    """Slots of a search's control array (float64): the engine writes it, ``_dp.must_stop``
    reads it."""

    DEADLINE = 0  #: wall-clock deadline, time.perf_counter seconds (inf = none)
    MAX_EVALS = 1  #: evaluations this call may spend (inf = no limit)
    FLAG = 2  #: stop flag, set to 1 by the caller's Ctrl-C handler


NUM_CONTROL = len(Control)


def no_control() -> np.ndarray:
    """A control array that never stops a search."""
    control = np.zeros(NUM_CONTROL)
    control[Control.DEADLINE] = np.inf
    control[Control.MAX_EVALS] = np.inf
    return control


def new_stats() -> np.ndarray:
    """A zeroed stats array (no violation seen: the VIOL_* slots are inf)."""
    stats = np.zeros(NUM_STATS)
    stats[Stat.VIOL_SRAM :] = np.inf
    return stats
