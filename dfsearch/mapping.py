"""Mapping files: a decision written down, for ``dfsearch eval --mapping FILE``.

A mapping file is TOML or JSON (the JSON that ``dfsearch run --json`` writes is one) with:

``shape``            list of network dimension sizes (may be omitted when every size is fixed);
                     fixed sizes must match the spec's, the product the chips per copy
``placement``        list, per dimension, of what it carries: "tp 4", "pp 4 x dp 2" (inner
                     kind first), "none" (``dfsearch.system.placement``); required when the spec
                     leaves a dimension's parallelism to the search and several placements
                     fit the shape; otherwise it may only repeat the spec's roles
``micro_batch_size`` integer (default: the spec's, else 1)
``num_tile``         integer T (required when the spec has several tile counts, as LLMs do;
                     with ``workload.tile_size``, T x tile_size must cover ``seq_len``)
``config``           table kernel name -> configuration index (may be omitted when forced)
``sharding``         table kernel name -> outer|m|k|n|none (omitted kernels: solved exactly)
``cores``            optional table kernel name -> {par_lane, par_stage} (cycle model)
Other keys (e.g. the results in a ``run --json`` file) are ignored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsearch.codes import Dim
from dfsearch.cost.lower import effective_num_config, forced_config
from dfsearch.cost.partition import kept_spec, partition_problem, plan_of
from dfsearch.cost.stages import LABELS, members_of, piece_spec
from dfsearch.decision import Decision
from dfsearch.errors import Issue, SpecError
from dfsearch.loader import parse_toml, read_text, spec_from_data, spec_to_data
from dfsearch.search import outer as outer_mod
from dfsearch.search.engine import full_sharding
from dfsearch.search.sharding import solve_spec_sharding
from dfsearch.spec import Spec
from dfsearch.system.placement import (
    Placement,
    fixed_placement,
    has_searched_dims,
    parse_dim,
    searched,
)
from dfsearch.system.ratios import groups
from dfsearch.workloads import model_of

__all__ = ["load_mapping", "load_staged_mapping", "StagedMapping", "load_partitioned_mapping",
           "decision_to_mapping", "mapping_to_toml", "with_mapping_training"]

#: Largest accepted values (the ranges of the matching spec fields, docs/spec.md).
MAX_MICRO_BATCH = 2**40
MAX_NUM_TILE = 2**30
MAX_CONFIG = 2**16 - 1


def _is_int(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _int_issue(key: str, v: Any, lo: int, hi: int, note: str = "") -> Issue:
    return Issue(key, f"must be an integer in [{lo}, {hi}]{note}. Got {v!r} instead.")


def _read(path: Path) -> dict[str, Any]:
    text = read_text(path)
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:  # also integers of more than 4300 digits
            raise SpecError(f"invalid JSON: {exc}", file=str(path)) from None
        except RecursionError:
            msg = "invalid JSON: arrays or objects are nested too deeply."
            raise SpecError(msg, file=str(path)) from None
        if not isinstance(data, dict):
            msg = f"must be a JSON object (a table). Got a {type(data).__name__} instead."
            raise SpecError(msg, file=str(path))
    else:
        data = parse_toml(text, str(path))
    if "mapping" in data and isinstance(data["mapping"], dict):
        data = data["mapping"]
    return data


def load_mapping(path: str | Path, spec: Spec) -> Decision:
    """Read a mapping file into a Decision for ``spec``.

    Every problem in the file is collected before one ``SpecError`` is raised.

    Raises
    ------
    SpecError
        For unreadable files, unknown kernel names, wrong types or values.
    """
    path = Path(path)
    issues: list[Issue] = []
    decision = _decision(_read(path), spec, issues)
    if issues or decision is None:
        raise SpecError(issues, file=str(path))
    return decision


def _decision(data: dict[str, Any], spec: Spec, issues: list[Issue], *, prefix: str = "",
              outer: tuple[tuple[int, ...], Placement | None, int] | None = None) -> Decision | None:
    """The decision a mapping table describes (None when it has problems, added to
    ``issues`` with ``prefix`` before their paths). ``outer`` = (shape, placement, micro-batch
    size) when they come from elsewhere (an end's table in a whole-model mapping)."""
    own: list[Issue] = []
    index = {k.name: i for i, k in enumerate(spec.graph.kernels)}
    if outer is None:
        shape = _read_shape(data, spec, own)
        placement = _read_placement(data, spec, shape, own)
        mbs = _int_field(data, "micro_batch_size", outer_mod.micro_batch_size(spec),
                         MAX_MICRO_BATCH, own)  # fmt: skip
    else:
        shape, placement, mbs = outer
    t = _read_num_tile(data, spec, own)
    config, c_eff = _read_config(data, spec, index, own)
    pinned = _read_sharding(data, index, own)
    pl, ps = _read_cores(data, spec, index, own)
    issues += [Issue(prefix + i.path, i.message) for i in own]
    if own:
        return None
    return Decision(
        shape=shape,
        sharding=_complete_sharding(spec, shape, t, pinned, placement),
        micro_batch_size=mbs or 1,
        num_tile=t,
        config=config,
        num_config=c_eff,
        par_lane=tuple(pl) if any(pl) else (),
        par_stage=tuple(ps) if any(ps) else (),
        placement=placement,
    )


@dataclass(frozen=True, slots=True)
class StagedMapping:
    """A mapping of a whole model in pipeline pieces (``cost/stages.py``)."""

    decisions: dict[str, Decision]  #: piece ("before", "layers", "after") -> its decision
    stage_layers: tuple[int, ...] | None  #: layer-graph executions per stage (None: best split)


def load_staged_mapping(path: str | Path, spec: Spec) -> StagedMapping:
    """Read the mapping of a whole model in pipeline pieces: the layer graph at the top level
    (shape, placement, micro-batch size, tile count, configurations, sharding of its kernels),
    one table per end (``embedding``, ``lm_head``: tile count, configurations, sharding), and
    optionally ``stage_layers``, the layer-graph executions of every stage.

    Raises
    ------
    SpecError
        As ``load_mapping``; also a missing end table or a ``stage_layers`` that does not
        give every stage at least one execution and all of them in total.
    """
    path = Path(path)
    data = _read(path)
    issues: list[Issue] = []
    members = members_of(spec)
    mbs = _int_field(data, "micro_batch_size", outer_mod.micro_batch_size(spec), MAX_MICRO_BATCH,
                     []) or 1  # fmt: skip  (the layer graph's reading reports a bad value)
    lay = _decision(data, piece_spec(spec, members["layers"], mbs), issues)
    decisions = {"layers": lay} if lay is not None else {}
    for name in ("before", "after"):
        key = LABELS[name]
        table = data.get(key)
        if not members[name]:
            if key in data:
                issues.append(Issue(key, "is not a piece of this graph: it has no such end."))
        elif not isinstance(table, dict):
            where = "first" if name == "before" else "last"
            issues.append(Issue(key, f"is required: a table with this end's num_tile, config and "
                                     f"sharding (it runs in the {where} pipeline stage). Got "
                                     f"{'none' if table is None else repr(table)} instead."))
        elif lay is not None:
            end = piece_spec(spec, members[name], mbs, end=True)
            d = _decision(table, end, issues, prefix=f"{key}.", outer=(lay.shape, lay.placement, mbs))
            if d is not None:
                decisions[name] = d
    split = _read_stage_layers(data, spec, lay, issues) if lay is not None else None
    if issues:
        raise SpecError(issues, file=str(path))
    return StagedMapping(decisions=decisions, stage_layers=split)


def load_partitioned_mapping(path: str | Path, spec: Spec) -> tuple[Decision, Any, Spec]:
    """Read the mapping of a ``workload.partition_graph`` spec (docs/mapping.md, "Pipeline
    partitions"): shape, placement, micro-batch size; ``partition``, every kernel's pipeline
    partition; ``sharding`` (kernels left out: solved on the whole graph, byte-minimal);
    ``num_tile``, ``num_config`` and ``config`` of the kernels of the slowest partition, which
    DFModel's intra-chip model runs. Returns (that partition's decision, the partition plan,
    the spec of that partition).

    Raises
    ------
    SpecError
        As ``load_mapping``; also a ``partition`` table that misses a kernel, gives an
        integer outside [0, PP - 1], puts a consumer before its producer, leaves a partition
        empty or breaks a pinned configuration or the forward/backward rule, and a ``config``
        entry for a kernel outside the slowest partition.
    """
    path = Path(path)
    data = _read(path)
    issues: list[Issue] = []
    index = {k.name: i for i, k in enumerate(spec.graph.kernels)}
    shape = _read_shape(data, spec, issues)
    placement = _read_placement(data, spec, shape, issues)
    _int_field(data, "micro_batch_size", outer_mod.micro_batch_size(spec), MAX_MICRO_BATCH, issues)
    pinned = _read_sharding(data, index, issues)
    if issues:
        raise SpecError(issues, file=str(path))
    pp = groups(spec.system, shape, placement).pp
    sharding = full_sharding(spec, shape, placement, pinned)
    problem, info = partition_problem(spec, shape, placement, sharding)
    part = _read_partition(data, spec, problem, issues)
    if issues or part is None:
        raise SpecError(issues, file=str(path))
    plan = plan_of(spec, problem, info, sharding, part, exact=False, lower_bound_ns=0.0, given=True)
    sub = kept_spec(spec, plan, pp)
    kept = set(plan.names)
    cfg = data.get("config", {})
    if isinstance(cfg, dict):
        for name in cfg:
            if name in index and name not in kept:
                issues.append(Issue(f"config.{name}", f"maps a kernel of partition "
                                    f"{part[index[name]]}: DFModel's intra-chip model runs only "
                                    f"the slowest partition, {plan.kept}, whose kernels need "
                                    "configurations (the others have none)."))  # fmt: skip
        cfg = {n: v for n, v in cfg.items() if n not in index or n in kept}
    rest = {k: v for k, v in data.items() if k not in ("sharding", "partition", "config")}
    d = _decision(rest | {"config": cfg}, sub, issues)
    if issues or d is None:
        raise SpecError(issues, file=str(path))
    return d, plan, sub


def _read_partition(data: dict[str, Any], spec: Spec, problem: Any,
                    issues: list[Issue]) -> tuple[int, ...] | None:
    """``partition``: every kernel's partition in [0, PP - 1], producers no later than their
    consumers, every partition non-empty, within each kernel's allowed range."""
    table = data.get("partition")
    kernels = spec.graph.kernels
    pp = problem.parts
    if not isinstance(table, dict):
        issues.append(Issue("partition", "is required: a table of kernel name -> pipeline "
                            f"partition in [0, {pp - 1}] for every kernel (the spec's "
                            "workload.partition_graph cuts the graph into PP partitions). Got "
                            f"{table!r} instead."))  # fmt: skip
        return None
    index = {k.name: i for i, k in enumerate(kernels)}
    part = [-1] * len(kernels)
    for name, v in table.items():
        if name not in index:
            issues.append(Issue(f"partition.{name}", "is not a kernel of the graph."))
        elif not _is_int(v, 0, pp - 1):
            issues.append(_int_issue(f"partition.{name}", v, 0, pp - 1, f" (PP = {pp})"))
        else:
            part[index[name]] = v
    for k in kernels:
        if k.name not in table:
            issues.append(Issue(f"partition.{k.name}", "is missing (every kernel needs one)."))
    if issues:
        return None
    for (s, d) in problem.edges:
        if part[s] > part[d]:
            issues.append(Issue(f"partition.{kernels[d].name}", f"must be >= "
                                f"{part[s]}, the partition of its producer {kernels[s].name!r} "
                                f"(partitions run in order). Got {part[d]} instead."))  # fmt: skip
    for i, k in enumerate(kernels):
        lo, hi = problem.lo[i], problem.hi[i]
        if not lo <= part[i] <= hi:
            why = (f"its pinned config {k.config}" if k.config >= 0 else
                   "the forward/backward rule: forward kernels in the first half of the "
                   "partitions, backward kernels in the second")
            issues.append(Issue(f"partition.{k.name}", f"must be in [{lo}, {hi}] ({why}). Got "
                                f"{part[i]} instead."))  # fmt: skip
    empty = sorted(set(range(pp)) - set(part))
    if empty:
        issues.append(Issue("partition", f"leaves partition(s) {', '.join(map(str, empty))} "
                            f"empty: each of the PP = {pp} partitions needs a kernel."))
    return None if issues else tuple(part)


def _read_stage_layers(data: dict[str, Any], spec: Spec, lay: Decision,
                       issues: list[Issue]) -> tuple[int, ...] | None:
    """``stage_layers``: PP integers >= 1 summing to E (None when absent)."""
    if "stage_cuts" in data:  # written by a search with search.stage_cuts (its JSON)
        issues.append(Issue("stage_cuts", "stage boundaries inside a layer (search.stage_cuts) "
                                          "cannot be given in a mapping: stage_layers counts "
                                          "whole layer-graph executions only. Got "
                                          f"{data['stage_cuts']!r}; remove stage_cuts and "
                                          "stage_layers to evaluate the best whole-layer split."))
        return None
    if "stage_layers" not in data:
        return None
    v = data["stage_layers"]
    pp = groups(spec.system, lay.shape, lay.placement).pp
    wl = spec.workload
    e = wl.num_layer // wl.num_layer_in_graph
    ok = (isinstance(v, list) and len(v) == pp and all(_is_int(x, 1, e) for x in v)
          and sum(v) == e)  # fmt: skip
    if not ok:
        issues.append(Issue("stage_layers", f"must list PP = {pp} integers >= 1, the layer-graph "
                                            f"executions of each stage, summing to num_layer / "
                                            f"num_layer_in_graph = {e}. Got {v!r} instead."))
        return None
    return tuple(v)


def _int_field(data: dict[str, Any], key: str, default: int | None, hi: int,
               issues: list[Issue]) -> int | None:
    """``data[key]`` (or ``default``) when it is an integer in [1, hi]; else an issue."""
    v = data.get(key, default)
    if v is None:
        return None
    if not _is_int(v, 1, hi):
        issues.append(_int_issue(key, v, 1, hi))
        return default
    return v


def _read_num_tile(data: dict[str, Any], spec: Spec, issues: list[Issue]) -> int:
    """The tile count: given (and allowed by the workload, e.g. an LLM's tile-size bound),
    or the spec's only one."""
    tiles = outer_mod.tile_counts(spec)
    t = _int_field(data, "num_tile", tiles[0] if len(tiles) == 1 else None, MAX_NUM_TILE, issues)
    if t is None:
        if "num_tile" not in data:  # else _int_field has said what is wrong with it
            issues.append(Issue("num_tile", "is required: the spec leaves the tile count free."))
        return 1
    problem = model_of(spec.workload).tile_count_issue(spec, t)
    if problem is not None:
        issues.append(Issue("num_tile", problem))
    return t


def _read_shape(data: dict[str, Any], spec: Spec, issues: list[Issue]) -> tuple[int, ...]:
    """The network shape: given (each fixed size as the spec's, the product the chips per
    copy), or the spec's only one."""
    shapes = outer_mod.shapes(spec)
    fallback = shapes[0] if shapes else (1,)
    shape = data.get("shape")
    if shape is None:
        if len(shapes) != 1:
            issues.append(Issue("shape", "is required: the spec leaves network sizes free."))
        return fallback
    chips = spec.system.num_chip
    if not (isinstance(shape, list) and all(_is_int(s, 1, chips) for s in shape)):
        msg = f"must be a list of integers in [1, {chips}] (num_chip). Got {shape!r} instead."
        issues.append(Issue("shape", msg))
        return fallback
    if len(shape) != len(spec.system.network):
        dims = len(spec.system.network)
        issues.append(Issue("shape", f"must have {dims} entries. Got {len(shape)} instead."))
        return tuple(shape)
    issues.extend(_shape_issues(tuple(shape), spec))
    return tuple(shape)


def _shape_issues(shape: tuple[int, ...], spec: Spec) -> list[Issue]:
    """A shape that contradicts the spec's network: a fixed size changed, or a product other
    than the chips of one copy."""
    out = []
    for i, (v, d) in enumerate(zip(shape, spec.system.network)):
        if d.size > 0 and v != d.size:
            out.append(Issue(f"shape[{i}]", f"must be {d.size}, the size system.network[{i}].size "
                             f"fixes. Got {v} instead."))  # fmt: skip
    chips = spec.system.num_chip // spec.num_copy
    if not out and math.prod(shape) != chips:
        copies = f" / {spec.num_copy} copies" if spec.num_copy > 1 else ""
        sizes = " * ".join(map(str, shape))
        out.append(Issue("shape", f"sizes must multiply to the chips of one copy, "
                         f"system.num_chip{copies} = {chips}. Got {sizes} = {math.prod(shape)} "
                         "instead."))  # fmt: skip
    return out


def _read_placement(data: dict[str, Any], spec: Spec, shape: tuple[int, ...],
                    issues: list[Issue]) -> Placement | None:
    """The placement: given and consistent with the spec (``_placement_issues``), or the only
    one the shape allows; None when the spec fixes every dimension's role (a given placement
    then only repeats them)."""
    raw = data.get("placement")
    if len(shape) != len(spec.system.network):
        return None  # reported by _read_shape
    roles = model_of(spec.workload).shards_across_chips
    free = roles and has_searched_dims(spec.system)
    if raw is None:
        options = outer_mod.placements(spec, shape) if free else [None]
        if len(options) == 1:
            return options[0]
        issues.append(Issue("placement", "is required: the spec leaves the parallelism of "
                            f"{_searched_dims(spec)} to the search and {len(options)} placements "
                            "fit this shape (e.g. placement = "
                            f"{json.dumps(list(options[0].texts()))})."))  # type: ignore[union-attr]
        return None
    if not roles:
        kind = spec.workload.kind.label
        issues.append(Issue("placement", f"must be omitted for a {kind} workload (tp/pp/dp apply "
                            "to LLM workloads only)."))  # fmt: skip
        return None
    n = len(spec.system.network)
    if not (isinstance(raw, list) and len(raw) == n):
        issues.append(Issue("placement", f"must be a list of {n} strings, one per network "
                            f"dimension (e.g. \"tp 4\", \"pp 4 x dp 2\"). Got {raw!r} instead."))
        return None
    dims = []
    for i, text in enumerate(raw):
        try:
            dims.append(parse_dim(text, shape[i]))
        except ValueError as exc:
            issues.append(Issue(f"placement[{i}]", str(exc)))
    if len(dims) != n:
        return None
    pl = Placement(tuple(dims))
    found = _placement_issues(spec, shape, pl)
    issues.extend(found)
    return pl if free and not found else None


def _searched_dims(spec: Spec) -> str:
    idx = [i for i, d in enumerate(spec.system.network) if searched(d.parallelism)]
    return " and ".join(f"system.network[{i}]" for i in idx)


def _placement_issues(spec: Spec, shape: tuple[int, ...], pl: Placement) -> list[Issue]:
    """A placement that contradicts the spec: a kind on two dimensions, a fixed role
    changed (it spans its whole dimension), or one the workload rejects (PP > num_layer)."""
    out = []
    owner: dict[object, int] = {}
    fixed = fixed_placement(spec.system, shape)
    for i, parts in enumerate(pl.dims):
        for part in parts:
            if part.kind in owner:
                out.append(Issue(f"placement[{i}]", f"must not carry {part.kind.label!r}: "
                                 f"placement[{owner[part.kind]}] carries it (each kind lives on "
                                 f"one dimension). Got {pl.dim_text(i)!r} instead."))  # fmt: skip
            owner.setdefault(part.kind, i)
        role = spec.system.network[i].parallelism
        if not searched(role) and parts != fixed.dims[i]:
            out.append(Issue(f"placement[{i}]", f"must be {fixed.dim_text(i)!r}: "
                             f"system.network[{i}].parallelism fixes the whole dimension to "
                             f"{role.label}. Got {pl.dim_text(i)!r} instead."))  # fmt: skip
    if not out and not model_of(spec.workload).admits_shape(spec, shape, pl):
        pp = groups(spec.system, shape, pl).pp
        out.append(Issue("placement", f"is not one the {spec.workload.kind.label} workload "
                         f"admits (every pipeline stage holds at least one layer: PP = {pp} must "
                         f"be <= the number of layers). Got {json.dumps(list(pl.texts()))} "
                         "instead."))  # fmt: skip
    return out


def _read_config(data: dict[str, Any], spec: Spec, index: dict[str, int],
                 issues: list[Issue]) -> tuple[tuple[int, ...], int]:
    """(configuration of every kernel, effective number of configurations)."""
    kernels = spec.graph.kernels
    cfg_table = data.get("config", {})
    if not isinstance(cfg_table, dict):
        msg = f"must be a table of kernel name -> configuration index. Got {cfg_table!r} instead."
        issues.append(Issue("config", msg))
        cfg_table = {}
    given = set(cfg_table)  # kernels with a value in the file, good or bad
    good: dict[str, int] = {}
    for name, v in cfg_table.items():
        if name not in index:
            issues.append(Issue(f"config.{name}", "is not a kernel of the graph."))
        elif not _is_int(v, 0, MAX_CONFIG):
            issues.append(_int_issue(f"config.{name}", v, 0, MAX_CONFIG))
        else:
            good[name] = v
    used = (max(good.values()) + 1) if good else None
    num_config = _int_field(data, "num_config", None, MAX_CONFIG + 1, issues)
    if num_config is not None and used is not None and used > num_config:
        msg = f"must be > every configuration index ({used - 1}). Got {num_config} instead."
        issues.append(Issue("num_config", msg))
    c_eff = effective_num_config(spec, num_config or used)
    if forced_config(spec, c_eff) and not good:
        return tuple(range(len(kernels))), c_eff
    table_broken = "config" in {i.path for i in issues}
    config = []
    for k in kernels:
        v = good.get(k.name)
        if v is None and k.config >= 0:
            v = k.config
        if v is None:
            if k.name not in given and not table_broken:
                issues.append(Issue(f"config.{k.name}", "is missing (every kernel needs one)."))
            v = 0
        config.append(v)
    return tuple(config), c_eff


def _read_sharding(data: dict[str, Any], index: dict[str, int],
                   issues: list[Issue]) -> dict[int, Dim]:
    """Kernel index -> pinned sharding dimension."""
    sh_table = data.get("sharding", {})
    if not isinstance(sh_table, dict):
        issues.append(Issue("sharding", "must be a table of kernel name -> sharding."))
        return {}
    pinned: dict[int, Dim] = {}
    for name, v in sh_table.items():
        if name not in index:
            issues.append(Issue(f"sharding.{name}", "is not a kernel of the graph."))
            continue
        try:
            pinned[index[name]] = Dim.from_label(v)  # type: ignore[assignment]
        except (KeyError, TypeError):
            allowed = ", ".join(repr(x) for x in Dim.labels())
            issues.append(Issue(f"sharding.{name}", f"must be one of {allowed}. Got {v!r} instead."))
    return pinned


def _read_cores(data: dict[str, Any], spec: Spec, index: dict[str, int],
                issues: list[Issue]) -> tuple[list[int], list[int]]:
    """(par_lane, par_stage) per kernel; 0 = chosen optimally."""
    n = len(spec.graph.kernels)
    pl, ps = [0] * n, [0] * n
    cores = data.get("cores", {})
    if not isinstance(cores, dict):
        msg = f"must be a table of kernel name -> {{par_lane, par_stage}}. Got {cores!r} instead."
        issues.append(Issue("cores", msg))
        return pl, ps
    most = spec.system.accelerator.cores
    for name, v in cores.items():
        if name not in index:
            issues.append(Issue(f"cores.{name}", "is not a kernel of the graph."))
        elif not (isinstance(v, dict) and set(v) == {"par_lane", "par_stage"}):
            msg = f"must be {{par_lane = int, par_stage = int}}. Got {v!r} instead."
            issues.append(Issue(f"cores.{name}", msg))
        else:
            bad = [f for f in ("par_lane", "par_stage") if not _is_int(v[f], 0, most)]
            for f in bad:
                note = " (0 = chosen optimally)"
                issues.append(_int_issue(f"cores.{name}.{f}", v[f], 0, most, note))
            if not bad:
                pl[index[name]], ps[index[name]] = v["par_lane"], v["par_stage"]
    return pl, ps


def _complete_sharding(spec: Spec, shape: tuple[int, ...], t: int, pinned: dict[int, Dim],
                       placement: Placement | None = None) -> tuple[Dim, ...]:
    from dataclasses import replace

    kernels = spec.graph.kernels
    if not model_of(spec.workload).searches_sharding(spec.execution):
        return tuple(Dim.NO for _ in kernels)
    if all(i in pinned or k.sharding is not None for i, k in enumerate(kernels)):
        return tuple(pinned.get(i, k.sharding) for i, k in enumerate(kernels))  # type: ignore[misc]
    ks = tuple(replace(k, sharding=pinned[i]) if i in pinned else k for i, k in enumerate(kernels))
    pinned_spec = replace(spec, graph=replace(spec.graph, kernels=ks))
    return solve_spec_sharding(pinned_spec, shape, t, placement).sharding


def decision_to_mapping(spec: Spec, d: Decision, names: tuple[str, ...] | None = None
                        ) -> dict[str, Any]:
    """The mapping-file object of a decision (inverse of ``load_mapping``); ``names``: the
    kernels it maps (default the spec's graph; a whole model in pieces: the layer graph's)."""
    names = names if names is not None else tuple(k.name for k in spec.graph.kernels)
    out: dict[str, Any] = {
        "shape": list(d.shape),
        "micro_batch_size": d.micro_batch_size,
        "num_tile": d.num_tile,
        "num_config": d.num_config or (max(d.config) + 1 if d.config else 1),
        "config": dict(zip(names, d.config)),
        "sharding": {n: s.label for n, s in zip(names, d.sharding)},
    }
    if d.placement is not None:
        out["placement"] = list(d.placement.texts())
    t = spec.training
    if t.searched and spec.graph.is_training:  # the training choices the search made
        out["training"] = {n: spec_to_data(getattr(t, n)) for n in t.searched}
    return out


def with_mapping_training(spec: Spec, path: str | Path) -> Spec:
    """``spec`` with the training choices it leaves to the search set to those of the
    mapping file's ``[training]`` table (written by ``run --mapping-out``; docs/mapping.md);
    ``spec`` itself when it leaves none or the file gives none. Only the choices the spec
    leaves to the search may be given (a ``SpecError`` names any other)."""
    t = spec.training
    table = _read(Path(path)).get("training")
    if not isinstance(table, dict) or not table:
        return spec
    given = {k: v for k, v in table.items() if k in t.searched}
    fixed = [k for k in table if k not in t.searched
             and spec_to_data(getattr(t, k, None)) != table[k]]  # same value: nothing to do
    if fixed:
        raise SpecError([Issue(f"training.{k}", "is not a choice the spec leaves to the search "
                               f"(those are {', '.join(t.searched)}). Got {table[k]!r} instead.")
                         for k in fixed], file=str(path))  # fmt: skip
    if not given:
        return spec
    data = spec_to_data(spec)
    data["training"] = {**data["training"], **given}
    return spec_from_data(data, file=str(path), base_dir=Path("."))


def _key(name: str) -> str:
    bare = name.replace("_", "").replace("-", "").isalnum() and name.isascii()
    return name if bare else json.dumps(name)


def mapping_to_toml(m: dict[str, Any]) -> str:
    """A mapping object as a commented TOML mapping file."""
    lines = [
        "# dfsearch mapping file: evaluate with `dfsearch eval SPEC --mapping THIS_FILE`",
        f"shape = {json.dumps(m['shape'])}",
        *([f"placement = {json.dumps(m['placement'])}  # per dimension, inner kind first"]
          if "placement" in m else []),
        f"micro_batch_size = {m['micro_batch_size']}",
        f"num_tile = {m['num_tile']}",
    ]
    if "num_config" in m:
        lines.append(f"num_config = {m['num_config']}  # configurations, empty ones included")
    if "stage_layers" in m:
        lines.append(f"stage_layers = {json.dumps(m['stage_layers'])}  # layer-graph "
                     "executions per pipeline stage")
    lines += _tables("", m)
    if "partition" in m:
        lines += ["", "[partition]  # kernel -> pipeline partition (DFModel's pipeline partitioning); config "
                      "maps the slowest partition's kernels, which every stage runs"]
        lines += [f"{_key(k)} = {v}" for k, v in m["partition"].items()]
    if "training" in m:
        lines += ["", "[training]  # the training choices the search made"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in m["training"].items()]
    for end in ("embedding", "lm_head"):
        if end in m:
            t = m[end]
            lines += ["", f"[{end}]  # runs once per micro-batch in the "
                          f"{'first' if end == 'embedding' else 'last'} pipeline stage",
                      f"num_tile = {t['num_tile']}", f"num_config = {t['num_config']}"]
            lines += _tables(f"{end}.", t)
    return "\n".join(lines) + "\n"


def _tables(prefix: str, m: dict[str, Any]) -> list[str]:
    """The ``config`` and ``sharding`` tables of a mapping object."""
    lines = ["", f"[{prefix}config]  # kernel -> configuration index"]
    lines += [f"{_key(k)} = {v}" for k, v in m["config"].items()]
    lines += ["", f"[{prefix}sharding]  # kernel -> dimension split across the TP group"]
    lines += [f"{_key(k)} = {json.dumps(v)}" for k, v in m["sharding"].items()]
    return lines
