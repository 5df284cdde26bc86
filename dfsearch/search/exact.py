"""Exact configuration assignment with OR-Tools CP-SAT (the optional ``[exact]`` extra).

``solve_exact(problem, time_limit_s=...)`` minimises the sum of configuration IIs of one
lowered problem (fixed outer choices: shape, sharding, micro-batch size, tile count,
number of configurations) over every assignment of kernels to configurations. It is a
certificate for the heuristic in ``dfsearch.search.assign``, never required: OR-Tools is
imported only inside this module's functions, and a missing OR-Tools raises
``SolverUnavailableError``.

The CP-SAT model is the evaluator's model (``dfsearch.cost.evaluate._eval_rows``), constraint by
constraint (docs/exact.md explains each piece):

* ``x[k, c]`` Booleans, one configuration per kernel; pins and the FWD/BWD rule
  (``assign._allowed``); precedence in cumulative form
  ``sum_{c' <= c} x[dst, c'] <= sum_{c' <= c} x[src, c']``; the num_input separation;
* ``B[e, c]`` (edge on chip in c) = x[src, c] AND x[dst, c]; spilled ``D[e, c]`` =
  x[src, c] + x[dst, c] - 2 B[e, c] (the XOR);
* compute: FLOP model linear in x; cycle model: per kernel a Pareto table of
  (cores, fewest cycles) from the evaluator's own ``min_cycles``, an element constraint
  picks one option, the cores of a configuration's kernels sum to at most the chip's cores
  and the configuration's compute time is at least each member's option time; this is
  exactly the evaluator's optimal core allocation (min over allocations of the max);
* memory: spilled edges and ``memory_size``; network: the linear kernel/edge terms, the
  maximum over the all-to-all/broadcast channels, the link-latency count;
* II per overlap mode: max(Tc, Tm, Tn), max(Tc, Tm) + Tn or Tc + Tm + Tn (epigraph);
* SRAM per configuration, in exact integer bytes: on-chip edges b*depth, spilled edges 2b,
  weights, sram_extra; a weight kernel alone in its configuration ("lone") contributes 0
  for its weight and for the spilled footprints of its out-edges, in both configurations:
  the evaluator then picks a weight tiling factor large enough (docs/model.md). As in the
  evaluator, a configuration that holds such a tiled footprint must fit strictly
  (sum of the untiled rest < capacity, since tiling divides but never removes a
  footprint); every other configuration fits when the sum is <= capacity;
* DRAM: fixed + act_mult * max_c T * live(c) <= capacity with
  live(c) = bytes of edges with Config(src) <= c <= Config(dst), Config(src) != Config(dst);
  with a second DRAM tier a Boolean selects the bandwidth regime exactly as the evaluator
  (slow regime iff the total exceeds the first tier).

Times are integers: every coefficient is ``ceil(t_ns * scale)``. A known feasible
assignment (the hint, or the contiguous-order DP's, whichever is better) gives an upper
bound U of the sum of IIs; ``scale`` maps U to ``TARGET_UNITS`` (1e9) integer units, the
objective is capped at U (plus the slack), and core options slower than U are dropped.
Without a known assignment U is a crude worst case (every kernel on one core, every edge
spilled). Keeping every coefficient and domain near 1e9 keeps the products CP-SAT forms in
presolve inside 64-bit integers: with OR-Tools 9.15, coefficients around 1e10-1e11 made
presolve return wrong "optimal" values and wrong "infeasible" verdicts (measured; see
docs/exact.md). Presolve also returned a wrong optimum on a small-coefficient model (two
DRAM tiers), so it is off by default (``presolve=False``); when it is on, an answer that a
known assignment refutes is recomputed without presolve. Rounding up makes the integer objective of any assignment at least
``scale`` times its float value and at most that plus ``slack`` units (``slack`` =
4 n + 2 E + C: one rounding per kernel term, two per edge memory term, one per
configuration maximum), so the proven lower bound is reported conservatively as
``(floor(bound) - slack) / scale``, and every solution is re-scored by the float evaluator.
Byte capacities (SRAM, DRAM) are exact integers divided by the gcd of their coefficients.

The evaluator decides a weight tiling factor and then re-checks the tiled footprints in
floating point (and, in v2, only divisors of the weight bytes are allowed). An assignment
that the integer model accepts but the evaluator rejects at such a boundary (a tiled sum
equal to the capacity, rounded up by 1 ulp; a weight too small to divide) is cut off with
a no-good constraint and the model is solved again (``MAX_CUTS``): the model is a
relaxation of the evaluator there, so the optimum after the cuts is still exact. Any other
rejection is a bug and raises ``RuntimeError``.

Instances larger than the documented limits are refused with status ``"too_large"``:
more than ``max_kernels`` kernels or ``max_configs`` configurations, cycle-model Pareto
tables with more than ``max_cycle_options`` entries in total, or v2 ``num_input`` kernels
(per-configuration tile counts and II multipliers are not modelled).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from dfsearch.codes import Overlap, Status
from dfsearch.cost.evaluate import min_cycles
from dfsearch.cost.lower import Problem
from dfsearch.cost.model import Evaluator
from dfsearch.errors import SolverUnavailableError
from dfsearch.search.assign import _allowed, assign_configs

__all__ = [
    "ExactResult",
    "solve_exact",
    "STATUSES",
    "MAX_KERNELS",
    "MAX_CONFIGS",
    "MAX_CYCLE_OPTIONS",
    "MAX_CUTS",
    "TARGET_UNITS",
]

#: statuses of ExactResult
STATUSES = ("optimal", "feasible", "infeasible", "too_large", "unknown")
#: default size limits (a proof within a minute on 2 cores is realistic below them)
MAX_KERNELS = 64
MAX_CONFIGS = 8
#: total entries of the cycle-model Pareto tables (sum over kernels)
MAX_CYCLE_OPTIONS = 20_000
#: integer units of the upper bound of the objective (see the module docstring)
TARGET_UNITS = 1e9

_INSTALL = 'the exact check needs OR-Tools: pip install "dfsearch[exact]"'
#: assignments rejected by the evaluator at a capacity boundary, cut off one by one
MAX_CUTS = 100


@dataclass(frozen=True, slots=True)
class ExactResult:
    """Outcome of ``solve_exact``.

    ``status``: "optimal" (proven, up to the scaling slack), "feasible" (a solution, no
    proof), "infeasible" (proven: no assignment satisfies the capacities), "too_large"
    (refused: outside the documented limits; see ``message``) or "unknown" (time limit
    before any solution). ``value_ns``: sum of configuration IIs of ``assignment``
    re-scored by the float evaluator (None without a solution). ``bound_ns``: a proven
    lower bound of the sum of IIs over all assignments (conservatively unscaled; inf when
    infeasible, None when refused). ``solver_value_ns``: CP-SAT's integer objective divided
    by ``scale``; ``slack_ns`` = slack / scale bounds the scaling error of one assignment.
    ``incumbents``: (seconds since the call started, solver value in ns) of every
    improving solution, when requested.
    """

    status: str
    value_ns: float | None
    bound_ns: float | None
    assignment: tuple[int, ...] | None
    seconds: float
    message: str = ""
    solver_value_ns: float | None = None
    scale: float = 0.0
    slack_ns: float = 0.0
    incumbents: tuple[tuple[float, float], ...] = field(default=())

    @property
    def proven(self) -> bool:
        return self.status == "optimal"


# --------------------------------------------------------------------------- helpers
def _require_ortools():
    """The cp_model module, or SolverUnavailableError."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:  # ModuleNotFoundError, or sys.modules["ortools"] = None
        raise SolverUnavailableError(_INSTALL) from exc
    return cp_model


def _to_int(values: np.ndarray) -> tuple[float, bool]:
    """A factor f such that every value * f is an integer (exact=True), else (1, False)."""
    vals = np.asarray(values, dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    for f in (1.0, 2.0, 4.0, 8.0, 16.0, 10.0, 100.0, 1000.0, 1e4, 1e5, 1e6):
        v = vals * f
        if np.all(np.abs(v) < 2.0**53) and np.all(np.floor(v) == v):
            return f, True
    return 1.0, False


def _ceil_units(t_ns: float, scale: float) -> int:
    """Integer time units of t_ns, rounded up (0 stays 0)."""
    if t_ns <= 0.0:
        return 0
    return int(math.ceil(t_ns * scale))


def _pareto(a: int, b: int, z: int, cores: int) -> list[tuple[int, int]]:
    """(cores, fewest cycles) options of one kernel where the cycles strictly drop."""
    if a <= 0 or b <= 0 or z <= 0:
        return [(1, 0)]
    out: list[tuple[int, int]] = []
    prev = None
    for p in range(1, cores + 1):
        cyc = int(min_cycles(a, b, z, p)[0])
        if prev is None or cyc < prev:
            out.append((p, cyc))
            prev = cyc
        if cyc <= z:  # one lane/stage step per cycle: cannot drop further
            break
    return out


def _largest_live(fixed: float, mult: float, t: float, cap: float, factor: float) -> int:
    """Largest integer L (bytes x factor) with fixed + mult * (L/factor * t) <= cap, in the
    evaluator's float arithmetic; -1 when even L = 0 fails."""
    if not fixed <= cap:
        return -1
    if mult <= 0.0 or cap == math.inf:
        return 2**62

    def ok(v: int) -> bool:
        return fixed + mult * ((v / factor) * t) <= cap

    guess = int(math.floor((cap - fixed) / (mult * t) * factor))
    guess = max(guess, 0)
    while guess > 0 and not ok(guess):
        guess -= 1
    while ok(guess + 1):
        guess += 1
    return guess if ok(guess) else -1


def _sym_pairs(allowed: np.ndarray, tiered_faster: bool) -> list[int]:
    """Configurations c such that any kernel allowed in c + 1 is allowed in c: an empty c
    followed by a non-empty c + 1 can be closed up without changing any II (and the DRAM
    peak only drops), so "c + 1 used => c used" keeps an optimum."""
    if tiered_faster:
        return []
    nc = allowed.shape[1]
    return [c for c in range(nc - 1) if np.all(allowed[:, c + 1] <= allowed[:, c])]


def _canonical(config: tuple[int, ...], pairs: list[int], nc: int) -> tuple[int, ...]:
    """Close up empty configurations as ``_sym_pairs`` allows (same value, valid hint)."""
    cfg = list(config)
    pair_set = set(pairs)
    changed = True
    while changed:
        changed = False
        used = [False] * nc
        for c in cfg:
            used[c] = True
        for c in range(nc - 1):
            if c in pair_set and not used[c] and used[c + 1]:
                cfg = [c if v == c + 1 else v for v in cfg]
                changed = True
                break
    return tuple(cfg)


def _rescore(problem: Problem, config: tuple[int, ...]) -> tuple[int, float]:
    """(status, sum of configuration IIs) of one assignment by the float evaluator."""
    out = Evaluator(problem).full(config)
    return out.status, out.all_config_ii_ns


def _trivial(problem: Problem, t0: float, cfg: tuple[int, ...] | None = None) -> ExactResult:
    """One possible assignment: every kernel in configuration k (kernel by kernel), one
    configuration, or ``cfg`` (pins and the FWD/BWD rule leave one choice per kernel)."""
    n = problem.num_kernels
    if cfg is None:
        cfg = tuple(range(n)) if problem.constants.fixed_config else (0,) * n
    st, ii = _rescore(problem, cfg)
    secs = time.perf_counter() - t0
    if st != 0:
        return ExactResult("infeasible", None, math.inf, None, secs, "the only assignment is infeasible")
    return ExactResult("optimal", ii, ii, cfg, secs, "the only assignment", ii, 1.0, 0.0)


def _refuse(t0: float, why: str) -> ExactResult:
    return ExactResult("too_large", None, None, None, time.perf_counter() - t0, why)


# --------------------------------------------------------------------------- the solver
@dataclass(frozen=True, slots=True)
class _Settings:
    """How ``solve_exact`` runs CP-SAT (its keyword arguments)."""

    t0: float  #: perf_counter at the start of the call
    time_limit_s: float
    seed: int
    workers: int
    max_deterministic_time: float | None
    log_incumbents: bool


def solve_exact(
    problem: Problem,
    *,
    time_limit_s: float,
    hint: tuple[int, ...] | None = None,
    max_kernels: int = MAX_KERNELS,
    max_configs: int = MAX_CONFIGS,
    max_cycle_options: int = MAX_CYCLE_OPTIONS,
    seed: int = 0,
    workers: int = 1,
    max_deterministic_time: float | None = None,
    log_incumbents: bool = False,
    presolve: bool = False,
) -> ExactResult:
    """Minimise the sum of configuration IIs of ``problem`` with CP-SAT (module docstring).

    Parameters
    ----------
    problem : Problem
        A lowered problem (``dfsearch.cost.lower.lower``): the outer choices are fixed.
    time_limit_s : float
        Wall-clock limit of the whole call (model building included).
    hint : tuple of int, optional
        A configuration per kernel (e.g. the heuristic's), given to CP-SAT as a hint.
    max_kernels, max_configs, max_cycle_options : int
        Size limits; larger instances are refused with status "too_large".
    seed, workers : int
        CP-SAT ``random_seed`` and ``num_workers`` (1 worker: deterministic up to the
        wall-clock limit).
    max_deterministic_time : float, optional
        CP-SAT's work limit in deterministic seconds: reproducible across machines (tests).
    log_incumbents : bool
        Record (seconds, value) of every improving solution (time-to-target plots).
    presolve : bool, default False
        Run CP-SAT's presolve. Off by default: OR-Tools 9.15's presolve returned wrong
        "optimal" values and wrong "infeasible" verdicts on models of this module
        (docs/exact.md); with it on, an answer refuted by a known assignment is recomputed
        without presolve.

    Returns
    -------
    ExactResult

    Raises
    ------
    SolverUnavailableError
        If OR-Tools is not installed (exit code 2).
    RuntimeError
        If the float evaluator rejects a solution of the model (a bug of this module).
    """
    run = _Settings(time.perf_counter(), time_limit_s, seed, workers, max_deterministic_time,
                    log_incumbents)  # fmt: skip
    cp_model = _require_ortools()
    screened = _screen(problem, run.t0, max_kernels, max_configs, max_cycle_options)
    if isinstance(screened, ExactResult):
        return screened
    known = _known_solution(problem, hint)
    b = _Builder(cp_model, problem, screened, known)
    if b.infeasible:
        return ExactResult("infeasible", None, math.inf, None, time.perf_counter() - run.t0, b.infeasible)
    b.build()
    _add_hint(b, hint)
    name, solver, config, value, log = _solve_with_cuts(cp_model, b, known, run, presolve)
    secs = time.perf_counter() - run.t0
    msg = "; ".join(b.notes)
    slack_ns = b.slack / b.scale
    if name == "INFEASIBLE":
        return ExactResult("infeasible", None, math.inf, None, secs, msg or "proven infeasible",
                           None, b.scale, slack_ns, tuple(log))  # fmt: skip
    bound = _unscale_bound(solver.best_objective_bound, b.slack, b.scale)
    if name not in ("OPTIMAL", "FEASIBLE"):
        why = "no solution within the limits" if name == "UNKNOWN" else f"CP-SAT status {name}"
        return ExactResult("unknown", None, bound, None, secs, "; ".join([why] + b.notes),
                           None, b.scale, slack_ns, tuple(log))  # fmt: skip
    status = "optimal" if name == "OPTIMAL" else "feasible"
    return ExactResult(status, value, min(bound, value), config, secs, msg,
                       solver.objective_value / b.scale, b.scale, slack_ns, tuple(log))  # fmt: skip


def _screen(
    problem: Problem, t0: float, max_kernels: int, max_configs: int, max_cycle_options: int
) -> ExactResult | list[list[tuple[int, int]]] | None:
    """The answer without a model (refused: v2 num_input kernels, beyond the size limits;
    one possible assignment: solved by the evaluator), else the cycle-model option tables
    for the model (None in the FLOP model)."""
    n, nc = problem.num_kernels, problem.num_config
    k = problem.constants
    if k.per_config_tiles or (k.ii_num_input and np.any(problem.kernels.num_input > 1)):
        return _refuse(t0, "refused: v2 num_input kernels (per-configuration tile counts and "
                       "II multipliers) are not modelled")  # fmt: skip
    if k.fixed_config or nc == 1:
        return _trivial(problem, t0)
    allowed = _allowed(problem)
    if np.all(allowed.sum(axis=1) == 1):  # pins and the FWD/BWD rule fix every kernel
        return _trivial(problem, t0, tuple(int(np.argmax(row)) for row in allowed))
    if n > max_kernels or nc > max_configs:
        return _refuse(t0, f"refused: {n} kernels and {nc} configurations exceed the limits "
                       f"({max_kernels} kernels, {max_configs} configurations)")  # fmt: skip
    if not k.cycle_model:
        return None
    tables = _tables(problem, max_cycle_options)
    if tables is None:
        return _refuse(t0, f"refused: the cycle-model option tables exceed "
                       f"{max_cycle_options} entries (cores = {k.cores})")  # fmt: skip
    return tables


def _add_hint(b: _Builder, hint: tuple[int, ...] | None) -> None:
    """Give CP-SAT a valid hint (empty configurations closed up as the symmetry breaking
    requires, ``_canonical``)."""
    n, nc = b.n, b.nc
    if hint is not None and len(hint) == n and all(0 <= int(h) < nc for h in hint):
        h = _canonical(tuple(int(v) for v in hint), b.pairs, nc)
        for k in range(n):
            for c in range(nc):
                b.model.add_hint(b.x[k][c], 1 if h[k] == c else 0)


def _solve_with_cuts(cp_model, b: _Builder, known, run: _Settings, presolve: bool):
    """Solve, re-score the solution with the float evaluator and, while it rejects it at a
    capacity boundary the integer model cannot see (float rounding of the tiled footprints,
    v2 divisors of the weight bytes), cut that assignment off and solve again (at most
    ``MAX_CUTS`` times, within the time limit; else the status becomes UNKNOWN). With
    presolve on, an answer a known assignment refutes is recomputed without presolve.
    Appends to ``b.notes``; returns (status name, solver, assignment, its sum of IIs,
    incumbent log)."""
    problem, n, nc = b.p, b.n, b.nc
    log: list[tuple[float, float]] = []
    cuts = 0
    config, value = None, math.inf
    while True:
        name, solver, part = _solve(cp_model, b, run, presolve)
        if presolve and known is not None and _contradicts(name, solver, known[1], b):
            # a known feasible assignment refutes CP-SAT's answer (OR-Tools 9.15 presolve
            # bugs, docs/exact.md): solve again without presolve
            b.notes.append(f"CP-SAT presolve answered {name} against a known solution; "
                           "re-solved without presolve")  # fmt: skip
            presolve = False
            name, solver, part = _solve(cp_model, b, run, False)
        log += part
        if name not in ("OPTIMAL", "FEASIBLE"):
            break
        config = tuple(
            next(c for c in range(nc) if solver.boolean_value(b.x[k][c])) for k in range(n)
        )
        st, value = _rescore(problem, config)
        if st == 0:
            break
        if st not in (Status.SRAM, Status.DRAM):
            raise RuntimeError(
                f"BUG: the evaluator rejects the exact solver's assignment {config} (status {st})"
            )
        cuts += 1
        if cuts > MAX_CUTS or time.perf_counter() - run.t0 >= run.time_limit_s:
            name = "UNKNOWN"
            break
        b.model.add(sum(b.x[k][config[k]] for k in range(n)) <= n - 1)
    if cuts:
        b.notes.append(f"{cuts} assignment(s) the evaluator rejects at a capacity boundary "
                       "were cut off")  # fmt: skip
    return name, solver, config, value, log


def _solve(cp_model, b: _Builder, run: _Settings, presolve: bool) -> tuple[str, object, list]:
    """One CP-SAT solve of ``b.model`` within what is left of the time limit: (status name,
    solver, (seconds, value) of every improving solution when logged)."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.num_workers = max(1, int(run.workers))
    prm.random_seed = int(run.seed)
    prm.relative_gap_limit = 0.0
    prm.absolute_gap_limit = 0.0
    prm.cp_model_presolve = presolve
    prm.max_time_in_seconds = max(run.time_limit_s - (time.perf_counter() - run.t0), 0.01)
    if run.max_deterministic_time is not None:
        prm.max_deterministic_time = float(run.max_deterministic_time)
    found: list[tuple[float, float]] = []
    if run.log_incumbents:

        class _Log(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                found.append((time.perf_counter() - run.t0, self.objective_value / b.scale))

        code = solver.solve(b.model, _Log())
    else:
        code = solver.solve(b.model)
    return solver.status_name(code), solver, found


def _contradicts(name: str, solver, known_ii: float, b: _Builder) -> bool:
    """True when a known feasible assignment (value known_ii) refutes CP-SAT's answer."""
    if name == "INFEASIBLE":
        return True
    if name in ("OPTIMAL", "FEASIBLE", "UNKNOWN"):
        bound = _unscale_bound(solver.best_objective_bound, b.slack, b.scale)
        return known_ii < bound * (1 - 1e-12)
    return False


def _unscale_bound(bound_units: float, slack_units: int, scale: float) -> float:
    """A proven lower bound in ns: (floor(bound) - slack) / scale, at least 0."""
    if not math.isfinite(bound_units):
        return 0.0
    return max(0.0, (math.floor(bound_units + 1e-9) - slack_units) / scale)


def _tables(problem: Problem, max_options: int) -> list[list[tuple[int, int]]] | None:
    """Per-kernel (cores, cycles) Pareto tables; None when they exceed ``max_options``."""
    cores = problem.constants.cores
    kt = problem.kernels
    tables, total = [], 0
    for k in range(problem.num_kernels):
        tab = _pareto(int(kt.a[k]), int(kt.b[k]), int(kt.z[k]), cores)
        total += len(tab)
        if total > max_options:
            return None
        tables.append(tab)
    return tables


def _known_solution(problem: Problem, hint) -> tuple[tuple[int, ...], float] | None:
    """The better of the hint and the contiguous-order DP's assignment, if feasible:
    (assignment, sum of IIs). It caps the objective and sets the time scale."""
    cands = []
    n, nc = problem.num_kernels, problem.num_config
    if hint is not None and len(hint) == n and all(0 <= int(h) < nc for h in hint):
        cands.append(tuple(int(h) for h in hint))
    a = assign_configs(problem, method="order-dp", anneal_iterations=0)
    if a.config is not None:
        cands.append(tuple(int(c) for c in a.config))
    best = None
    for cfg in cands:
        st, ii = _rescore(problem, cfg)
        if st == 0 and (best is None or ii < best[1]):
            best = (cfg, ii)
    return best


def _gcd(values) -> int:
    g = 0
    for v in values:
        g = math.gcd(g, int(v))
    return max(g, 1)


class _Builder:
    """The CP-SAT model of one problem (see the module docstring); ``build()`` fills it."""

    def __init__(self, cp_model, problem: Problem, tables, known) -> None:
        p = self.p = problem
        self.model = cp_model.CpModel()
        self.n, self.nc = p.num_kernels, p.num_config
        kt, et, k = p.kernels, p.edges, p.constants
        self.E = len(et.src)
        self.src = [int(s) for s in et.src]
        self.dst = [int(d) for d in et.dst]
        self.allowed = _allowed(p)
        self.notes: list[str] = []
        self.infeasible = ""
        self.T = float(k.num_tile)
        self.cycle = k.cycle_model
        self.cores = k.cores
        self.freq = k.freq_GHz
        self.bw1 = k.dram_bw
        self.cap1, self.cap2 = k.dram_cap, k.dram2_cap
        self.tiered = self.cap2 > 0.0
        self.bw2 = (
            (self.cap1 * self.bw1 + self.cap2 * k.dram2_bw) / (self.cap1 + self.cap2)
            if self.tiered else self.bw1
        )  # fmt: skip
        T, n, E = self.T, self.n, self.E
        arlat = k.ar_latency_ns
        # float time terms (ns)
        self.comp_f = [T * float(kt.compute_ns[i]) for i in range(n)]
        net = [
            T * float(kt.net_tile_ns[i]) + float(kt.net_once_ns[i]) + arlat * float(kt.all_reduce[i])
            for i in range(n)
        ]
        for e in range(E):
            net[self.src[e]] += T * float(et.net_tile_ns[e]) + arlat * float(et.all_reduce[e])
        self.net_f = net
        self.chan_f = np.asarray(kt.channel_ns, dtype=np.float64)
        self.chans = [j for j in range(self.chan_f.shape[1]) if np.any(self.chan_f[:, j] > 0)]
        self.memk_f = [float(kt.memory_bytes[i]) for i in range(n)]
        self.meme_f = [T * float(et.buffer_bytes[e]) for e in range(E)]
        self.tables_f = (
            [[(cores, T * cyc / self.freq) for cores, cyc in tab] for tab in tables]
            if tables is not None else None
        )  # fmt: skip
        # scale: the known solution's sum of IIs (else a crude upper bound) ~ TARGET_UNITS
        self.slack = 4 * n + 2 * E + self.nc
        if known is not None and known[1] > 0:
            self.scale = TARGET_UNITS / known[1]
            self.cap_units: int | None = int(math.ceil(known[1] * self.scale)) + self.slack
        else:
            worst = self._worst_ns()
            self.scale = TARGET_UNITS / worst if worst > 0 else 1.0
            self.cap_units = None
        self.pairs = _sym_pairs(self.allowed, self.tiered and self.bw2 > self.bw1)
        self._dram_limits()

    def _worst_ns(self) -> float:
        """Every kernel on one core in one configuration, every edge spilled."""
        bw = min(self.bw1, self.bw2)
        comp = sum(t[0][1] for t in self.tables_f) if self.tables_f else sum(self.comp_f)
        mem = (sum(self.memk_f) + 2.0 * sum(self.meme_f)) / bw
        chan = float(self.chan_f[:, self.chans].sum()) if self.chans else 0.0
        return comp + mem + sum(self.net_f) + chan

    def u(self, t_ns: float) -> int:
        return _ceil_units(t_ns, self.scale)

    # ---- DRAM capacity limits (exact float boundary of the evaluator)
    def _dram_limits(self) -> None:
        p = self.p
        self.fixed, self.mult = p.constants.dram_fixed, p.constants.dram_act_mult
        eb = np.asarray(p.edges.buffer_bytes, dtype=np.float64)
        self.fdr, exact = _to_int(eb)
        self.live_needed = self.mult > 0.0 and self.cap1 < math.inf and self.E > 0
        if self.live_needed and not exact:
            self.notes.append("edge bytes are not integral: live DRAM bytes rounded up (conservative)")
        self.L1 = _largest_live(self.fixed, self.mult, self.T, self.cap1, self.fdr)
        self.L2 = (
            _largest_live(self.fixed, self.mult, self.T, self.cap1 + self.cap2, self.fdr)
            if self.tiered else -1
        )  # fmt: skip
        if self.L1 < 0 and self.L2 < 0:
            self.infeasible = "the fixed DRAM bytes exceed the capacity"

    # ---- the model
    def build(self) -> None:
        self._structure()
        self._sram()
        self._dram()
        self._times()

    def spill(self, e: int, c: int):
        x, B = self.x, self.B
        return x[self.src[e]][c] + x[self.dst[e]][c] - 2 * B[e][c]

    def _structure(self) -> None:
        m, n, nc, allowed = self.model, self.n, self.nc, self.allowed
        x = self.x = [[m.new_bool_var(f"x{k}_{c}") for c in range(nc)] for k in range(n)]
        for k in range(n):
            m.add_exactly_one(x[k])
            for c in range(nc):
                if not allowed[k, c]:
                    m.add(x[k][c] == 0)
        for s, d in zip(self.src, self.dst):  # precedence, cumulative form
            for c in range(nc - 1):
                m.add(sum(x[d][: c + 1]) <= sum(x[s][: c + 1]))
        if self.p.constants.num_input_mixed:
            has_set = [m.new_bool_var(f"numin{c}") for c in range(nc)]
            for k in range(n):
                for c in range(nc):
                    lit = has_set[c] if self.p.kernels.num_input[k] > 0 else ~has_set[c]
                    m.add_implication(x[k][c], lit)
        self.B = []
        for s, d in zip(self.src, self.dst):
            row = []
            for c in range(nc):
                if allowed[s, c] and allowed[d, c] and s != d:
                    v = m.new_bool_var(f"B{len(self.B)}_{c}")
                    m.add_implication(v, x[s][c])
                    m.add_implication(v, x[d][c])
                    m.add_bool_or([~x[s][c], ~x[d][c], v])
                    row.append(v)
                else:
                    row.append(0)
            self.B.append(row)
        for c in self.pairs:  # close up empty configurations (symmetry)
            used = m.new_bool_var(f"used{c}")
            m.add(sum(x[k][c] for k in range(n)) >= used)
            for k in range(n):
                m.add_implication(x[k][c + 1], used)

    def _sram(self) -> None:
        p, m, x, n, nc, E = self.p, self.model, self.x, self.n, self.nc, self.E
        cap = p.constants.sram_cap
        if not (p.constants.sram_check and cap < math.inf):
            return
        kt, et = p.kernels, p.edges
        is_w = kt.is_weight
        wsram = np.asarray(kt.weight_sram, dtype=np.float64)
        extra = np.asarray(kt.sram_extra, dtype=np.float64)
        fpb = np.asarray(et.sram_bytes, dtype=np.float64) * np.asarray(et.sram_depth)
        fpd = 2.0 * np.asarray(et.sram_bytes, dtype=np.float64)
        f, exact = _to_int(np.concatenate([wsram, extra, fpb, fpd]))
        if not exact:
            self.notes.append("SRAM bytes are not integral: footprints rounded up (conservative)")

        def ib(v: float) -> int:
            return int(math.ceil(v * f)) if v > 0 else 0

        capf = cap * f
        cap_le = int(math.floor(capf))  # sum <= cap
        cap_lt = cap_le - 1 if float(capf).is_integer() else cap_le  # sum < cap
        lone: dict[tuple[int, int], object] = {}
        for k in range(n):
            for c in range(nc):
                if not (is_w[k] and self.allowed[k, c]):
                    continue
                v = m.new_bool_var(f"lone{k}_{c}")
                others = [x[j][c] for j in range(n) if j != k]
                m.add_implication(v, x[k][c])
                for o in others:
                    m.add_implication(v, ~o)
                m.add_bool_or([~x[k][c], v] + others)
                lone[k, c] = v
        lone_of = {k: sum(v for (j, _), v in lone.items() if j == k) for k in range(n) if is_w[k]}
        for c in range(nc):
            terms: list[tuple[int, object]] = []
            strict_if = []
            for k in range(n):
                if extra[k] > 0:
                    terms.append((ib(extra[k]), x[k][c]))
                if wsram[k] > 0:
                    if (k, c) in lone:
                        terms.append((ib(wsram[k]), x[k][c] - lone[k, c]))
                        strict_if.append(lone[k, c])
                    else:
                        terms.append((ib(wsram[k]), x[k][c]))
            for e in range(E):
                s, d = self.src[e], self.dst[e]
                if not (self.allowed[s, c] or self.allowed[d, c]):
                    continue
                if fpb[e] > 0 and not isinstance(self.B[e][c], int):
                    terms.append((ib(fpb[e]), self.B[e][c]))
                if fpd[e] <= 0:
                    continue
                if is_w[s]:  # spilled and not tiled: D AND NOT lone(src)
                    dn = m.new_bool_var(f"Dn{e}_{c}")
                    m.add(dn + lone_of[s] >= self.spill(e, c))
                    terms.append((ib(fpd[e]), dn))
                    if cap_lt < cap_le:
                        sd = m.new_bool_var(f"Sd{e}_{c}")  # spilled AND tiled
                        m.add(sd + 1 >= self.spill(e, c) + lone_of[s])
                        strict_if.append(sd)
                else:
                    terms.append((ib(fpd[e]), self.spill(e, c)))
            if not terms:
                continue
            g = _gcd(a for a, _ in terms)
            lhs = sum((a // g) * v for a, v in terms)
            le, lt = cap_le // g, cap_lt // g
            if lt < le and strict_if:
                strict = m.new_bool_var(f"strict{c}")
                for v in strict_if:
                    m.add_implication(v, strict)
                m.add(lhs + (le - lt) * strict <= le)
            else:
                m.add(lhs <= le)

    def _dram(self) -> None:
        m, x, n, nc, E = self.model, self.x, self.n, self.nc, self.E
        self.tier2 = None
        L1, L2 = self.L1, self.L2
        live: list = []
        g = 1
        if self.live_needed:
            eb = np.asarray(self.p.edges.buffer_bytes, dtype=np.float64)
            w = [int(math.ceil(eb[e] * self.fdr)) for e in range(E)]
            g = _gcd(v for v in w if v > 0)
            U = [[sum(x[k][: c + 1]) for c in range(nc)] for k in range(n)]
            for c in range(nc):
                expr = 0
                for e in range(E):
                    if w[e] <= 0:
                        continue
                    s, d = self.src[e], self.dst[e]
                    on = U[s][c] - (U[d][c - 1] if c > 0 else 0) - self.B[e][c]
                    expr += (w[e] // g) * on
                live.append(expr)
        l1 = L1 // g if L1 >= 0 else -1
        l2 = L2 // g if L2 >= 0 else -1
        if not self.tiered:
            for expr in live:
                m.add(expr <= l1)
            return
        t2 = self.tier2 = m.new_bool_var("tier2")
        if L1 < 0:
            m.add(t2 == 1)
        if L2 < 0:
            m.add(t2 == 0)
        if not live:  # the total is the fixed bytes alone: the regime is known
            m.add(t2 == (0 if L1 >= 0 else 1))
            return
        for expr in live:
            if l1 >= 0:
                m.add(expr <= l1).only_enforce_if(~t2)
            if l2 >= 0:
                m.add(expr <= l2).only_enforce_if(t2)
        if l1 >= 0:  # slow regime exactly when some configuration exceeds the first tier
            over = [m.new_bool_var(f"over{c}") for c in range(nc)]
            for c, expr in enumerate(live):
                m.add(expr >= l1 + 1).only_enforce_if(over[c])
                m.add(expr <= l1).only_enforce_if(~over[c])
                m.add_implication(over[c], t2)
            m.add_bool_or(over).only_enforce_if(t2)

    def _times(self) -> None:
        m, x, n, nc, E, u = self.model, self.x, self.n, self.nc, self.E, self.u
        top = self.cap_units
        if top is None:
            top = u(self._worst_ns()) + self.slack
        opt_cores, opt_time = [], []
        if self.cycle:
            for k, tab in enumerate(self.tables_f):
                rows = [(cores, u(t)) for cores, t in tab]
                kept = [r for r in rows if r[1] <= top] or rows[-1:]
                cs, ts = [r[0] for r in kept], [r[1] for r in kept]
                if len(kept) == 1:
                    opt_cores.append(cs[0])
                    opt_time.append(ts[0])
                    continue
                idx = m.new_int_var(0, len(kept) - 1, f"opt{k}")
                cv = m.new_int_var(min(cs), max(cs), f"cores{k}")
                tv = m.new_int_var(min(ts), max(ts), f"ctime{k}")
                m.add_element(idx, cs, cv)
                m.add_element(idx, ts, tv)
                opt_cores.append(cv)
                opt_time.append(tv)
        overlap = self.p.constants.overlap
        ii_vars = []
        for c in range(nc):
            members = [k for k in range(n) if self.allowed[k, c]]
            if self.cycle:
                tc = m.new_int_var(0, top, f"tc{c}")
                core_terms = []
                for k in members:
                    m.add(tc >= opt_time[k]).only_enforce_if(x[k][c])
                    if isinstance(opt_cores[k], int):
                        core_terms.append(opt_cores[k] * x[k][c])
                    else:
                        ci = m.new_int_var(0, self.cores, f"cin{k}_{c}")
                        m.add(ci == opt_cores[k]).only_enforce_if(x[k][c])
                        m.add(ci == 0).only_enforce_if(~x[k][c])
                        core_terms.append(ci)
                if core_terms:
                    m.add(sum(core_terms) <= self.cores)
            else:
                tc = sum(u(self.comp_f[k]) * x[k][c] for k in members)
                if self.cores < len(members):
                    m.add(sum(x[k][c] for k in members) <= self.cores)

            # mem() reads this iteration's c and members, and is only called in this iteration
            def mem(bw: float):
                expr = sum(u(self.memk_f[k] / bw) * x[k][c] for k in members)  # noqa: B023
                for e in range(E):
                    if u(self.meme_f[e] / bw):
                        expr += u(self.meme_f[e] / bw) * self.spill(e, c)  # noqa: B023
                return expr

            if self.tiered:
                tm = m.new_int_var(0, top, f"tm{c}")
                m.add(tm >= mem(self.bw1)).only_enforce_if(~self.tier2)
                m.add(tm >= mem(self.bw2)).only_enforce_if(self.tier2)
            else:
                tm = mem(self.bw1)
            tn = sum(u(self.net_f[k]) * x[k][c] for k in members)
            if self.chans:
                ch = m.new_int_var(0, top, f"ch{c}")
                for j in self.chans:
                    m.add(ch >= sum(u(float(self.chan_f[k, j])) * x[k][c] for k in members))
                tn = tn + ch
            ii = m.new_int_var(0, top, f"ii{c}")
            if overlap == Overlap.PERFECT:  # the epigraph of cost.overlap.combine_overlap
                m.add(ii >= tc)
                m.add(ii >= tm)
                m.add(ii >= tn)
            elif overlap == Overlap.COMPUTE_MEMORY:
                m.add(ii >= tc + tn)
                m.add(ii >= tm + tn)
            else:
                m.add(ii >= tc + tm + tn)
            ii_vars.append(ii)
        total = sum(ii_vars)
        if self.cap_units is not None:
            m.add(total <= self.cap_units)
        m.minimize(total)
