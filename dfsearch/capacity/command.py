"""``dfsearch serve SPEC``: read a serve spec, search, and explain the answer
(docs/serving.md, "Capacity search").

:func:`serve` returns the report's lines and writes the ``--json`` and ``--csv`` outputs;
with no deployment meeting the SLOs it raises :class:`InfeasibleError` (exit code 1) naming
the closest deployment and the SLO it breaks, by how much. Bad input: :class:`SpecError`
(exit code 2).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from dfsearch.capacity import step_store
from dfsearch.capacity.deployments import Outcome
from dfsearch.capacity.mapped_steps import (
    Shape,
    StepCache,
    batch_grid,
    context_grid,
    digest,
    prefill_grid,
    replica_model,
)
from dfsearch.capacity.sampled import sample
from dfsearch.capacity.search import SearchResult, search, space_size
from dfsearch.capacity.serve_spec import ChipOption, ServeSpec, read_serve_spec
from dfsearch.capacity.spec_measure import SpecMeasure, chip_data
from dfsearch.capacity.traffic import requests
from dfsearch.codes import ServeMode
from dfsearch.errors import InfeasibleError, Issue, SpecError
from dfsearch.loader import spec_from_data
from dfsearch.presets import chip_named

__all__ = ["serve", "Answer", "answer", "answer_of", "chip_dram_bytes", "chip_figures", "COLUMNS"]

COLUMNS = ("mode", "chips", "dollars_per_hour", "prefill_chip", "prefill_tp", "prefill_pp", "prefill_replicas",
           "chip", "tp", "pp",
           "replicas", "batch_cap", "chunk_tokens", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
           "e2e_p99_s", "goodput_per_s", "slo_attainment", "output_tokens_per_s", "dollars_per_mtok",
           "kv_utilisation", "joules_per_token", "preemptions",
           "ttft_excess", "tpot_excess", "meets_slos", "note")


@dataclass(frozen=True, slots=True)
class Answer:
    serve: ServeSpec
    result: SearchResult
    step_searches: int
    step_points: int = 0  #: step points used (searched or read from a step cache)
    space_size: int = 0  #: deployments in the space (``search.space_size``)


def answer(path: Path, step_cache: Path | None = None) -> Answer:
    """Search the serve spec at ``path`` (the step points through dfsearch's own search;
    ``step_cache``: a file keeping them between runs, ``step_store``)."""
    data, serve = read_serve_spec(path)
    return answer_of(data, serve, path, step_cache)


def answer_of(data: dict, serve: ServeSpec, path: Path, step_cache: Path | None = None) -> Answer:
    """:func:`answer` for a serve spec already read: ``data`` (every table but ``[serve]``)
    and its checked ``[serve]`` table; ``path`` names the spec in messages and its folder
    holds the files the spec includes (a study's points run through here, docs/studies.md)."""
    figures = {chip.name: chip_figures(path, data, chip) for chip in serve.chips}
    usable = {name: serve.memory_fraction * dram for name, (dram, _) in figures.items()}
    reqs = requests(serve.traffic, serve.requests, serve.seed)
    measure = SpecMeasure(data, str(path), serve.scale_out_bw_GBps, serve.chips)
    cache = StepCache(measure, digest([data, serve.scale_out_bw_GBps, serve.chips]))
    if step_cache is not None:
        cache.preload(step_store.load(step_cache, cache.digest))
    grids = {"prefills": prefill_grid({max(c, b) for c in serve.chunk_tokens for b in serve.batch_caps}),
             "batches": batch_grid(serve.batch_caps),
             "contexts": context_grid(int(reqs.prompt_tokens.min()) + 1,
                                      int((reqs.prompt_tokens + reqs.output_tokens).max()))}

    def model_of(shape: Shape):
        return replica_model(cache, shape, usable_bytes_per_chip=usable[shape.chip],
                             watts_per_chip=figures[shape.chip][1], **grids)

    size = space_size(serve)
    if serve.sampler in ("tpe", "nsga2"):
        result = sample(serve, reqs, model_of)
    elif serve.sampler == "auto" and size > serve.exhaustive_limit:
        result = sample(serve, reqs, model_of, "tpe", f"auto: {size:,} deployments > serve.exhaustive_limit = "
                        f"{serve.exhaustive_limit:,}")
    else:
        result = search(serve, reqs, model_of)
    if step_cache is not None and cache.searches:
        step_store.save(step_cache, cache.digest, cache.entries())
    return Answer(serve, result, cache.searches, len(cache.entries()), size)


def chip_dram_bytes(path: Path, data: dict, chip: ChipOption) -> float:
    """The DRAM per chip of ``chip``, after checking the spec with it (a bad chip table: the
    error names it)."""
    return chip_figures(path, data, chip)[0]


def chip_figures(path: Path, data: dict, chip: ChipOption) -> tuple[float, float]:
    """:func:`chip_dram_bytes` and the watts per chip: a chip option naming a preset, the
    preset's TDP; else the spec's ``cost.chip_power_W`` (its own preset's TDP unless set);
    NaN when there is no figure (no TDP, or 0 W)."""
    where = f"serve.chips.{chip.name}: " if chip.name else ""
    try:
        base = spec_from_data(chip_data(data, chip), file=str(path), base_dir=path.parent)
    except SpecError as e:
        raise SpecError([Issue(where + i.path, i.message) for i in e.issues], file=str(path)) from None
    kind = getattr(base.workload, "kind", None)
    if getattr(kind, "label", None) != "llm_serving":
        raise SpecError(Issue("workload.kind", f'must be "llm_serving" for dfsearch serve. Got '
                              f"{getattr(kind, 'label', kind)!r} instead."), file=str(path))
    dram = base.system.memory.dram_bytes
    if not dram > 0:
        raise SpecError(Issue(where + "system.memory.dram_bytes", "must be > 0 for dfsearch serve (the KV cache "
                              f"lives in what the weights leave). Got {dram!r} instead."), file=str(path))
    preset = chip_named(chip.preset) if chip.preset else None
    watts = base.cost.chip_power_W if preset is None else (preset.tdp.in_base() or 0.0)
    return dram, (watts if watts > 0 else math.nan)


def serve(path: Path, *, json_out: str | None = None, csv_out: Path | None = None,
          step_cache: Path | None = None) -> list[str]:
    """The report of :func:`answer`; writes ``csv_out`` (every deployment looked at) and
    ``json_out`` ('-': returned as the only line)."""
    a = answer(path, step_cache)
    if csv_out is not None:
        _write(csv_out, csv_text(a.result.outcomes))
    lines = report(path, a)
    if json_out is not None:
        text = json.dumps(to_json(a), indent=2, default=lambda o: None) + "\n"
        if json_out == "-":
            lines = [text.rstrip("\n")]
        else:
            _write(Path(json_out), text)
    if a.result.best is None:
        raise InfeasibleError(infeasible_message(a))
    return lines


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as e:
        raise SpecError(f"cannot write: {e.strerror or e}.", file=str(path)) from None


def row(o: Outcome) -> dict:
    c = o.candidate
    p = c.prefill_shape
    return {"mode": c.mode.label, "chips": c.chips, "dollars_per_hour": o.dollars_per_hour,
            "prefill_chip": p.chip if p else "", "chip": c.shape.chip, "prefill_tp": p.tp if p else "", "prefill_pp": p.pp if p else "",
            "prefill_replicas": c.prefill_replicas if p else "", "tp": c.shape.tp, "pp": c.shape.pp,
            "replicas": c.replicas, "batch_cap": c.batch_cap, "chunk_tokens": c.chunk_tokens,
            "ttft_p50_s": o.ttft[0], "ttft_p99_s": o.ttft[1], "tpot_p50_s": o.tpot[0], "tpot_p99_s": o.tpot[1],
            "e2e_p99_s": o.e2e_p99_s, "goodput_per_s": o.goodput_per_s, "slo_attainment": o.slo_attainment,
            "output_tokens_per_s": o.output_tokens_per_s, "dollars_per_mtok": dollars_per_mtok(o),
            "kv_utilisation": o.kv_utilisation, "joules_per_token": o.joules_per_token,
            "preemptions": o.preemptions,
            "ttft_excess": o.ttft_excess, "tpot_excess": o.tpot_excess,
            "meets_slos": o.feasible and not o.note, "note": o.note}


def dollars_per_mtok(o: Outcome) -> float:
    """Dollars per million output tokens: the price per hour over the output tokens of an
    hour at the simulated rate (NaN when not simulated)."""
    return o.dollars_per_hour * 1e6 / (o.output_tokens_per_s * 3600.0) if o.output_tokens_per_s > 0 else math.nan


def csv_text(outcomes) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    w.writeheader()
    for o in outcomes:
        w.writerow({k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row(o).items()})
    return out.getvalue()


def to_json(a: Answer) -> dict:
    r = a.result

    def clean(d: dict) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

    return {"best": clean(row(r.best)) if r.best else None,
            "runner_up": clean(row(r.runner_up)) if r.runner_up else None,
            "closest": None if r.best else (clean(row(r.closest)) if r.closest else None),
            "front": [clean(row(o)) for o in r.front], "looked_at": len(r.outcomes),
            "simulations": r.simulations, "stopped_by_budget": r.stopped, "sampled": r.sampled or None, "step_searches": a.step_searches,
            "deployments_in_space": a.space_size, "limits": list(r.limits),
            "unfit_shapes": [{"chip": s.chip, "tp": s.tp, "pp": s.pp, "why": why} for s, why in r.unfit],
            "load": [{"pool": p, "prefill_busy_at_least": a_, "decode_busy_at_least": b_} for p, a_, b_ in r.load]}


def _slo_line(o: Outcome, s: ServeSpec) -> str:
    return (f"P99 TTFT {o.ttft[1]:.4g} s (SLO {s.ttft_p99_s:g} s, {o.ttft_excess:+.0%}), "
            f"P99 TPOT {o.tpot[1] * 1e3:.4g} ms (SLO {s.tpot_p99_s * 1e3:g} ms, {o.tpot_excess:+.0%})")


def report(path: Path, a: Answer) -> list[str]:
    s, r = a.serve, a.result
    t = s.traffic
    lines = [f"{path}: {s.rate_per_s:g} requests/s, prompt {t.prompt}, output {t.output}, {s.requests} "
             f"requests (seed {s.seed}); SLOs P99 TTFT <= {s.ttft_p99_s:g} s, P99 TPOT <= {s.tpot_p99_s * 1e3:g} ms",
             f"searched: modes {', '.join(m.label for m in s.modes)}; TP {list(s.tp)} x PP {list(s.pp)}; batch caps "
             f"{list(s.batch_caps)}; chunks {list(s.chunk_tokens)}; <= {s.max_chips} chips; "
             + (f"STOPPED at serve.max_simulations = {s.max_simulations}: the answer is the cheapest found, "
                "not proven" if r.stopped else f"sampled, not exhaustive ({r.sampled}): not proven the cheapest"
                if r.sampled else f"exhaustive with bounds over {a.space_size:,} deployments (docs/serving.md)")
             + f": {len(r.outcomes)} deployments looked at, {r.simulations} simulations, "
             f"{a.step_searches} step searches (each point searched once"
             + (", others read from --step-cache)" if a.step_searches < a.step_points else ")")]
    lines += [f"  cannot serve: {sh}: {why}" for sh, why in r.unfit]
    b = r.best
    if b is None:
        return lines
    lines += [f"best: {b.candidate.describe()}",
              f"  cost ${b.dollars_per_hour:,.2f}/h, goodput "
              f"{b.goodput_per_s:.4g} requests/s ({b.slo_attainment:.1%} meet both SLOs), "
              f"{b.output_tokens_per_s:,.0f} output tokens/s, ${dollars_per_mtok(b):.3g} per million output tokens",
              f"  TTFT P50 {b.ttft[0]:.4g} s, P99 {b.ttft[1]:.4g} s; " + (
                  "no TPOT (one-token outputs)" if math.isnan(b.tpot[1]) else
                  f"TPOT P50 {b.tpot[0] * 1e3:.4g} ms, P99 {b.tpot[1] * 1e3:.4g} ms") +
              f"; end-to-end P99 {b.e2e_p99_s:.4g} s; {b.preemptions} preemptions",
              f"  KV utilisation {_share(b.kv_utilisation)} (" + ("the decode pool's, " if b.candidate.prefill_shape
                                                                   else "") +
              f"time average over the run), energy {_joules(b.joules_per_token)} per output token",
              f"  nearest its SLO here: {b.binding} (P99 at {1 + max(b.ttft_excess, b.tpot_excess):.0%} of it)"]
    lines += _tie_lines(r.outcomes, b)
    for pool, pre, dec in r.load:
        lines.append(f"  load ({pool}): at least {pre:.0%} of the time prefilling and {dec:.0%} decoding "
                     "(the least work per request x the rate / replicas)")
    c = b.candidate
    busy = 0.0
    if c.mode is ServeMode.COLOCATED and c.replicas > 1 and r.load:
        busy = (r.load[0][1] + r.load[0][2]) * c.replicas / (c.replicas - 1)
        lines.append(f"  with {c.replicas - 1} replicas: at least {busy:.0%} busy" +
                     (" -- overloaded, not simulated" if busy >= 1 else ""))
    u = r.runner_up
    over = sum(1 for o in r.outcomes if o.note.startswith("overloaded") and o.dollars_per_hour < b.dollars_per_hour)
    if busy >= 1:
        lines.append("  binds: throughput -- one replica fewer cannot carry the rate")
    elif over and (u is None or max(u.ttft_excess, u.tpot_excess) > 1):
        lines.append(f"  binds: throughput -- {over} cheaper deployments are overloaded by the bound" + (
            "" if u is None else f"; the nearest simulated miss has P99 {u.binding} at "
            f"{1 + max(u.ttft_excess, u.tpot_excess):.0f}x its SLO (a growing queue)"))
    elif u is not None:
        lines.append(f"  binds: the {u.binding} SLO -- cheaper, the nearest miss breaks it by "
                     f"{max(u.ttft_excess, u.tpot_excess):+.0%}")
    lines += [f"  limits: {x}" for x in r.limits]
    lines.append("  cheaper: " + _cheaper(r.outcomes, b.dollars_per_hour))
    if u is not None:
        lines.append(f"  nearest miss: {u.candidate.describe()}: {_slo_line(u, s)}")
    for mode in s.modes:
        ok = [o for o in r.outcomes if o.candidate.mode is mode and o.feasible and not o.note]
        top = min(ok, key=lambda o: (o.dollars_per_hour, o.candidate.chips, -o.goodput_per_s), default=None)
        lines.append(f"  cheapest {mode.label} found: " + (
            f"{top.candidate.describe()}, ${top.dollars_per_hour:,.2f}/h" if top else
            "none among the sampled deployments" if r.sampled else
            f"none at <= ${b.dollars_per_hour:,.2f}/h (the search stops at the answer's cost)"))
    lines.append("cost vs goodput front: " + "; ".join(
        f"${o.dollars_per_hour:,.2f}/h -> {o.goodput_per_s:.4g}/s" for o in r.front))
    return lines


def _share(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1%}"


def _joules(x: float) -> str:
    return "n/a (no chip power figure)" if math.isnan(x) else f"{x:.4g} J"


def _tie_lines(outcomes, b: Outcome) -> list[str]:
    """Why this one among the deployments meeting the SLOs at the answer's cost and chips:
    the order of ``search.rank`` after them (goodput, then headroom, then co-located)."""
    same = [o for o in outcomes if o.feasible and not o.note and o is not b
            and round(o.dollars_per_hour, 6) == round(b.dollars_per_hour, 6) and o.candidate.chips == b.candidate.chips]
    if not same:
        return []
    o = max(same, key=lambda o: (o.goodput_per_s, -max(o.ttft_excess, o.tpot_excess)))
    why = ("goodput" if b.goodput_per_s > o.goodput_per_s else
           "headroom" if max(b.ttft_excess, b.tpot_excess) < max(o.ttft_excess, o.tpot_excess) else
           "mode (co-located first)" if b.candidate.mode is ServeMode.COLOCATED else "the order looked at")
    return [f"  why this one: {len(same) + 1} deployments meet the SLOs at ${b.dollars_per_hour:,.2f}/h and "
            f"{b.candidate.chips} chips; it wins on {why} (worst P99 at {1 + max(b.ttft_excess, b.tpot_excess):.1%} "
            f"of its SLO against {1 + max(o.ttft_excess, o.tpot_excess):.1%} for {o.candidate.describe()})"]


def _cheaper(outcomes, dollars: float) -> str:
    """Why nothing cheaper: the cheaper deployments looked at, by the reason they fail."""
    kinds = {"simulated, failing the SLOs": 0, "overloaded (throughput bound)": 0,
             "too slow unloaded": 0, "prefill pool alone too slow": 0, "no room (KV cache or mapping)": 0}
    for o in outcomes:
        if o.dollars_per_hour >= dollars - 1e-6:
            continue
        key = ("simulated, failing the SLOs" if not o.note else "overloaded (throughput bound)"
               if o.note.startswith("overloaded") else "too slow unloaded" if "unloaded" in o.note
               else "prefill pool alone too slow" if "alone" in o.note else "no room (KV cache or mapping)")
        kinds[key] += 1
    return "; ".join(f"{n} {k}" for k, n in kinds.items() if n) + " (--csv lists them)" if any(
        kinds.values()) else "none looked at"


def infeasible_message(a: Answer) -> str:
    s, c = a.serve, a.result.closest
    head = f"no deployment of <= {s.max_chips} chips meets the SLOs at {s.rate_per_s:g} requests/s" + (
        f" within serve.max_simulations = {s.max_simulations} (the search stopped there)" if a.result.stopped else "")
    if c is None:
        why = "; ".join(f"{sh}: {w}" for sh, w in a.result.unfit) or f"none fits {s.max_chips} chips"
        return f"{head}: no replica shape can serve ({why})."
    if math.isinf(max(c.ttft_excess, c.tpot_excess)):
        return f"{head}. Closest: {c.candidate.describe()}, ruled out: {c.note}."
    if c.note and math.isnan(c.tpot[1]):
        return (f"{head}. Closest: {c.candidate.describe()} ({c.note}); binding: "
                f"{'TTFT' if c.ttft_excess >= c.tpot_excess else 'TPOT'} by "
                f"{max(c.ttft_excess, c.tpot_excess):+.0%}.")
    return f"{head}. Closest: {c.candidate.describe()}: {_slo_line(c, s)}; binding: {c.binding}."
