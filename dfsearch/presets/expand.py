"""Expand preset names in the raw data of a spec into the spec's ordinary keys.

``expand_presets(table, path)`` takes the parsed TOML of a spec and returns a new dict in
which ``[system] preset``, ``[[system.network]] fabric`` and ``[workload] model`` are
replaced by the keys they stand for; a key the spec gives itself always wins. Pure: no I/O,
the input is not changed. Unknown names raise one :class:`~dfsearch.errors.SpecError` with
every problem, each naming the field, the value and the accepted names.

>>> out = expand_presets({"system": {"preset": "h100", "num_chip": 8,
...                       "network": [{"fabric": "nvlink", "size": 8}]}}, "s.toml")
>>> out["system"]["accelerator"]
{'cores': 132, 'freq_GHz': 1.83, 'sram_bytes': 117850112.0, 'systolic_width': 32, 'systolic_height': 64}
>>> dim = out["system"]["network"][0]
>>> {k: dim[k] for k in ("size", "topology", "link_bw_GBps", "bus_efficiency")}
{'size': 8, 'topology': 'switch', 'link_bw_GBps': 450.0, 'bus_efficiency': 0.822}
>>> len(dim["all_reduce_sizes_bytes"]), dim["all_reduce_busbw_GBps"][11]
(24, 88.78)
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

from dfsearch.errors import Issue, SpecError
from dfsearch.presets.chips import CHIPS, ChipPreset, chip_named
from dfsearch.presets.fabrics import FABRICS, FAMILIES, ROLES, FabricPreset, fabric_named
from dfsearch.presets.models import MODELS, ModelPreset, model_named
from dfsearch.presets.represent import systolic_shape

__all__ = ["expand_presets", "GEMM_CEILING", "GEMM_CEILING_FP8", "GEMM_CEILING_SERVING"]

_LLM_GENERATORS = ("llm", "llm-fwd")


def expand_presets(table: dict[str, Any], path: str) -> dict[str, Any]:
    """A copy of spec data ``table`` with its presets expanded (``path`` names the file in
    errors). Tables that are not tables are left for the loader to report."""
    data = copy.deepcopy(table)
    if not isinstance(data, dict):
        return data
    issues: list[Issue] = []
    system = data.get("system")
    if isinstance(system, dict):
        chip = _expand_system(data, system, issues)
        # a misspelt preset is reported once, not again by each fabric it would resolve
        if chip is not None or not issues:
            _expand_fabrics(system, chip, issues)
    workload = data.get("workload")
    if isinstance(workload, dict) and "model" in workload:
        _expand_model(data, workload, issues)
    if issues:
        raise SpecError(issues, file=path)
    return data


# --------------------------------------------------------------------------- names
def _accepted(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _unknown(field: str, value: Any, what: str, names: list[str], aliases: list[str]) -> Issue:
    """The issue of a name that is no preset: the accepted names (aliases are accepted too,
    not listed) and the closest name or alias."""
    hint = ""
    if isinstance(value, str):
        close = difflib.get_close_matches(value.lower(), names + aliases, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
    shown = repr(value) if isinstance(value, str) else f"{value!r} (not a string)"
    return Issue(field, f"must name a {what} preset: one of {_accepted(names)} (or an alias, "
                        f"docs/presets.md). Got {shown} instead.{hint}")


def _names(presets: Any) -> tuple[list[str], list[str]]:
    """(the presets' names, their aliases)."""
    return list(presets), [a for p in presets.values() for a in p.aliases]


# --------------------------------------------------------------------------- system
def _expand_system(data: dict[str, Any], system: dict[str, Any], issues: list[Issue]
                   ) -> ChipPreset | None:
    if "preset" not in system:
        return None
    name = system.pop("preset")
    chip = chip_named(name) if isinstance(name, str) else None
    if chip is None:
        issues.append(_unknown("system.preset", name, "chip", *_names(CHIPS)))
        return None
    accel = system.setdefault("accelerator", {})
    memory = system.setdefault("memory", {})
    if not isinstance(accel, dict) or not isinstance(memory, dict):
        return chip
    _fill(accel, "cores", chip.cores.in_base(), chip, issues, "system.accelerator", int)
    _fill(accel, "freq_GHz", chip.clock.in_base(), chip, issues, "system.accelerator")
    _fill(accel, "sram_bytes", chip.sram_bytes(), chip, issues, "system.accelerator")
    _fill_systolic(data, accel, chip, issues)
    _default_realistic(data)
    _fill(memory, "dram_bw_GBps", _hbm_bandwidth(data, chip), chip, issues, "system.memory")
    _fill(memory, "dram_bytes", chip.hbm_capacity.in_base(), chip, issues, "system.memory")
    tdp = chip.tdp.in_base()
    cost = data.setdefault("cost", {})
    if tdp is not None and isinstance(cost, dict):
        cost.setdefault("chip_power_W", tdp)
    return chip


#: the fraction of the dense peak a large, tile-aligned GEMM reaches under the realistic
#: execution model (``execution.compute_util`` there); fitted on three training anchors
#: modelled with their embedding and LM head (benchmarks/validate.py ``FIT_IDS``;
#: docs/validation.md says how)
GEMM_CEILING = 0.625
#: the same for 1-byte (FP8) words, as a fraction of the FP8 peak: fitted on two FP8
#: prefill anchors (benchmarks/validate.py ``FP8_FIT_IDS``; docs/validation.md says how)
GEMM_CEILING_FP8 = 0.525
#: the same for 2-byte words in a serving step (``kind = "llm_serving"``): an inference
#: engine's GEMMs, without the training step's optimizer, recomputation and pipeline time that
#: ``GEMM_CEILING`` absorbs; fitted on one FP16 prefill anchor (benchmarks/validate.py
#: ``SERVING_FIT_IDS``; docs/validation.md says how)
GEMM_CEILING_SERVING = 0.825
#: workload kinds whose steps a GPU runs with nothing to overlap with a kernel's launch and
#: tensor-parallel collectives: the realistic model defaults them to ``overlap =
#: "compute_memory"`` (docs/model.md, "The realistic execution model")
SERIAL_KINDS = ("llm_serving",)


def _default_realistic(data: dict[str, Any]) -> None:
    """A spec that names a chip preset runs the realistic execution model unless it says
    ``execution.model = "dfmodel"``; then ``compute_util`` defaults to ``GEMM_CEILING``
    (``GEMM_CEILING_FP8`` with 1-byte words, ``GEMM_CEILING_SERVING`` for a serving step's
    wider words) and a serving step's ``overlap`` to ``compute_memory`` (launches and
    collectives run after each kernel, ``SERIAL_KINDS``)."""
    execution = data.setdefault("execution", {})
    if not isinstance(execution, dict):
        return  # the loader reports it
    execution.setdefault("model", "realistic")
    if execution["model"] == "realistic":
        fp8 = execution.get("word_bytes") == 1
        workload = data.get("workload")
        serving = isinstance(workload, dict) and workload.get("kind") in SERIAL_KINDS
        wide = GEMM_CEILING_SERVING if serving else GEMM_CEILING
        execution.setdefault("compute_util", GEMM_CEILING_FP8 if fp8 else wide)
        if serving:
            execution.setdefault("overlap", "compute_memory")


def _hbm_bandwidth(data: dict[str, Any], chip: ChipPreset) -> float | None:
    """The HBM bandwidth a spec gets: the chip's peak, times its measured achievable
    fraction (``hbm_achievable_fraction``, when the preset has one) under the realistic
    execution model (docs/model.md, "The realistic execution model")."""
    peak = chip.hbm_bandwidth.in_base()
    execution = data.get("execution")
    if peak is None or not isinstance(execution, dict) or execution.get("model") != "realistic":
        return peak
    fraction = dict(chip.measured).get("hbm_achievable_fraction")
    return peak if fraction is None or fraction.value is None else peak * fraction.value


def _fill(table: dict[str, Any], key: str, value: float | None, chip: ChipPreset,
          issues: list[Issue], where: str, kind: type = float) -> None:
    """``table[key] = value`` unless the spec gives it; a value the preset lacks is an issue
    unless the spec gives it."""
    if key in table:
        return
    if value is None:
        issues.append(Issue(f"{where}.{key}", f"is required: preset {chip.name!r} has no "
                                              "published value for it (docs/presets.md). Give "
                                              "it explicitly."))
        return
    table[key] = kind(round(value, 9)) if kind is float else kind(value)


def _fill_systolic(data: dict[str, Any], accel: dict[str, Any], chip: ChipPreset,
                   issues: list[Issue]) -> None:
    """The array that gives the precision's peak (``execution.word_bytes``, default 2) with
    the spec's cores and clock; left alone when the spec gives either dimension."""
    if "systolic_width" in accel or "systolic_height" in accel:
        return
    execution = data.get("execution", {})
    word = execution.get("word_bytes", 2) if isinstance(execution, dict) else 2
    cores, freq = accel.get("cores"), accel.get("freq_GHz")
    if not _positive(word) or not _positive(cores) or not _positive(freq):
        return  # the loader reports the bad or missing value
    peak = chip.peak(word)
    if peak is None or peak.value is None:
        have = ", ".join(f"{p.word_bytes} ({p.precision})" for p in chip.peaks)
        issues.append(Issue("execution.word_bytes", f"must be a word size with a dense peak in "
                                                    f"preset {chip.name!r}: one of {have}. Got "
                                                    f"{word} instead."))
        return
    width, height = systolic_shape(float(peak.value), int(cores), float(freq))
    accel["systolic_width"], accel["systolic_height"] = width, height


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


# --------------------------------------------------------------------------- fabrics
def _expand_fabrics(system: dict[str, Any], chip: ChipPreset | None, issues: list[Issue]) -> None:
    dims = system.get("network")
    if not isinstance(dims, list):
        return
    for i, dim in enumerate(dims):
        if not isinstance(dim, dict) or "fabric" not in dim:
            continue
        field = f"system.network[{i}].fabric"
        fabric = _resolve_fabric(dim.pop("fabric"), chip, field, issues)
        if fabric is None:
            continue
        dim.setdefault("topology", fabric.topology.label)
        dim.setdefault("link_bw_GBps", fabric.link_bw_GBps())
        domain = _domain_size(fabric, system.get("num_chip"))
        if domain is not None:
            dim.setdefault("size", domain)
        latency = fabric.latency.in_base()
        if latency is not None:
            dim.setdefault("link_latency_ns", latency)
        efficiency = fabric.bus_efficiency()
        if efficiency is not None:
            dim.setdefault("bus_efficiency", efficiency)
        curve = fabric.all_reduce_curve
        if curve is not None and "all_reduce_sizes_bytes" not in dim:
            dim.setdefault("all_reduce_busbw_GBps", list(curve.busbw_GBps))
            dim["all_reduce_sizes_bytes"] = list(curve.sizes_bytes)


def _domain_size(fabric: FabricPreset, num_chip: Any) -> int | None:
    """The size a scale-up fabric gives its dimension when the spec leaves it out: its
    domain (8 GPUs of an NVLink node), when that divides the chip count; else None (the
    search chooses the size, as for any dimension)."""
    if fabric.role != "scale-up" or fabric.domain is None or fabric.domain.value is None:
        return None
    size = int(fabric.domain.value)
    ok = isinstance(num_chip, int) and not isinstance(num_chip, bool) and num_chip % size == 0
    return size if ok and num_chip > 0 else None


def _resolve_fabric(name: Any, chip: ChipPreset | None, field: str, issues: list[Issue]
                    ) -> FabricPreset | None:
    """A fabric by its own name, or a family / role name through the chip preset."""
    names, aliases = _names(FABRICS)
    names += [*FAMILIES, *ROLES]
    if not isinstance(name, str):
        issues.append(_unknown(field, name, "fabric", names, aliases))
        return None
    fabric = fabric_named(name)
    if fabric is not None:
        return fabric
    key = name.lower()
    if key not in FAMILIES and key not in ROLES:
        issues.append(_unknown(field, name, "fabric", names, aliases))
        return None
    if chip is None:
        issues.append(Issue(field, f"{name!r} names the chip preset's network, so it needs "
                                   "system.preset; or name a fabric: one of "
                                   f"{_accepted(list(FABRICS))}. Got {name!r} without "
                                   "system.preset."))
        return None
    own = [FABRICS[f] for f in (chip.scale_up, chip.scale_out) if f is not None]
    match = [f for f in own if key in (f.family, f.role)]
    if not match:
        offered = _accepted([n for f in own for n in (f.family, f.role, f.name)]) or "none"
        issues.append(Issue(field, f"must name a fabric of preset {chip.name!r} ({offered}) or "
                                   f"a fabric preset. Got {name!r} instead."))
        return None
    return match[0]


# --------------------------------------------------------------------------- model
def _expand_model(data: dict[str, Any], workload: dict[str, Any], issues: list[Issue]) -> None:
    name = workload.pop("model")
    model = model_named(name) if isinstance(name, str) else None
    if model is None:
        issues.append(_unknown("workload.model", name, "model", *_names(MODELS)))
        return
    kind = workload.setdefault("kind", "llm")
    if kind == "llm":
        _fill_llm(data, workload, model, issues)
    elif kind == "llm_serving":
        _fill_serving(data, workload, model, issues)
    else:
        issues.append(Issue("workload.model", f"needs workload.kind 'llm' or 'llm_serving' "
                                              f"(a transformer). Got kind {kind!r} with model "
                                              f"{model.name!r}."))


def _shape(model: ModelPreset) -> dict[str, int]:
    return {"hidden_dim": model.hidden, "num_head": model.heads, "head_dim": model.head_dim,
            "num_layer": model.layers}


def _layer(model: ModelPreset) -> dict[str, int]:
    """The generator keys of the model's layer (GQA, FFN width and kind, experts)."""
    out = {"num_kv_head": model.kv_heads, "ffn_dim": model.ffn, "gated_ffn": int(model.gated)}
    if model.num_expert:
        out.update(num_expert=model.num_expert, top_k=model.top_k)
    return out


def _fill_llm(data: dict[str, Any], workload: dict[str, Any], model: ModelPreset,
              issues: list[Issue]) -> None:
    for key, value in _shape(model).items():
        workload.setdefault(key, value)
    workload.setdefault("seq_len", int(model.seq_len.value or 1))
    workload.setdefault("vocab_size", model.vocab)
    graph = data.setdefault("graph", {"generator": "llm"})
    if not isinstance(graph, dict):
        return
    if graph.get("generator") in _LLM_GENERATORS:
        for key, value in _layer(model).items():
            graph.setdefault(key, value)
    elif graph.get("generator") == "llm-decode":
        _fill_decode(graph, model, issues)


def _fill_decode(graph: dict[str, Any], model: ModelPreset, issues: list[Issue]) -> None:
    """The ``llm-decode`` generator's layer keys (it calls the FFN width ``mlp_dim``)."""
    if model.num_expert:
        issues.append(Issue("workload.model", f"is a mixture of experts ({model.name!r}); the "
                                              "llm-decode generator has dense layers only. Use "
                                              "generator 'llm' or a dense model."))
        return
    layer = {"num_kv_head": model.kv_heads, "mlp_dim": model.ffn, "gated_ffn": int(model.gated)}
    for key, value in layer.items():
        graph.setdefault(key, value)


def _fill_serving(data: dict[str, Any], workload: dict[str, Any], model: ModelPreset,
                  issues: list[Issue]) -> None:
    if model.num_expert:
        issues.append(Issue("workload.model", f"is a mixture of experts ({model.name!r}); "
                                              "workload.kind 'llm_serving' models dense layers "
                                              "only. Use kind 'llm' or a dense model."))
        return
    for key, value in {**_shape(model), **_layer(model)}.items():
        workload.setdefault(key, value)
    data.setdefault("graph", {"generator": "llm-serving"})
