"""The preset catalogue (chips, fabrics, models) and its expansion into spec keys.

Golden numbers: the datasheet peaks and published parameter counts stored in the presets
(each with its source, checked below); parameter counts are recomputed from the shapes with
the closed form written out in ``params_from_shape``.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dfsearch.errors import SpecError
from dfsearch.loader import spec_from_data
from dfsearch.presets import CHIPS, FABRICS, MODELS, expand_presets
from dfsearch.presets.chips import GENERAL_MEASURED
from dfsearch.presets.fabrics import FAMILIES, ROLES
from dfsearch.presets.models import ModelPreset
from dfsearch.presets.represent import peak_tflops, systolic_shape
from dfsearch.presets.sourced import DERIVED, Sourced

# ------------------------------------------------------------------ every number is sourced
ALL_SOURCED: list[tuple[str, Sourced]] = (
    [(f"chip {c.name}", s) for c in CHIPS.values() for s in c.sourced()]
    + [(f"fabric {f.name}", s) for f in FABRICS.values() for s in f.sourced()]
    + [(f"model {m.name}", s) for m in MODELS.values() for s in m.sourced()]
    + [(f"general {k}", s) for k, s in GENERAL_MEASURED]
)


@pytest.mark.parametrize("owner,number", ALL_SOURCED, ids=[o for o, _ in ALL_SOURCED])
def test_every_number_has_a_source_with_an_address(owner, number):
    if number.value is None:  # not published: the note says so and what to do
        assert number.note, owner
        return
    assert number.source is not None, owner
    assert number.source.url.startswith("https://"), (owner, number.source.url)
    assert number.source.citation.strip(), owner
    # the text it was read from; a derived number may instead give its formula
    assert number.quote.strip() or number.note.startswith(DERIVED), (owner, number)


def test_model_shapes_and_fabric_topologies_have_a_source_with_an_address():
    for m in MODELS.values():
        assert m.shape_source.url.startswith("https://") and m.shape_quote.strip(), m.name
    for f in FABRICS.values():
        assert f.topology_source.url.startswith("https://") and f.topology_quote.strip(), f.name


def test_names_and_aliases_are_unique_and_fabrics_exist():
    for presets, generic in ((CHIPS, ()), (FABRICS, (*FAMILIES, *ROLES)), (MODELS, ())):
        names = [n for p in presets.values() for n in (p.name, *p.aliases)] + list(generic)
        assert len(names) == len(set(names)), names
        assert all(n == n.lower() for n in names), names  # looked up lower-cased
    for chip in CHIPS.values():
        for fabric in (chip.scale_up, chip.scale_out):
            assert fabric is None or fabric in FABRICS, (chip.name, fabric)


# ------------------------------------------------------------------ peaks of the representation
#: chips whose clock the sources read do not give (the spec must give freq_GHz)
NO_CLOCK = {"b200", "sn40l"}

PEAKS = [(c.name, p.word_bytes) for c in CHIPS.values() if c.name not in NO_CLOCK for p in c.peaks]


def test_the_chips_without_a_clock_are_known():
    assert {c.name for c in CHIPS.values() if c.clock.value is None} == NO_CLOCK


@pytest.mark.parametrize("name,word", PEAKS)
def test_systolic_representation_gives_the_datasheet_peak(name, word):
    """2 x w x h x cores x clock within 0.5 % of the published dense peak."""
    chip = CHIPS[name]
    cores, freq = int(chip.cores.value), chip.clock.in_base()
    datasheet = chip.peak(word).value
    w, h = systolic_shape(datasheet, cores, freq)
    assert peak_tflops(w, h, cores, freq) == pytest.approx(datasheet, rel=5e-3)


def test_h100_bf16_is_32_by_64_per_sm_at_1_83_ghz():
    """989.4e12 / (2 x 132 SMs x 1.83e9) = 2048 MACs per SM and cycle (4 tensor cores x 512)."""
    assert systolic_shape(989.4, 132, 1.83) == (32, 64)
    assert peak_tflops(32, 64, 132, 1.83) == pytest.approx(989.43, abs=0.01)


def test_sram_is_l2_plus_register_file_plus_shared_memory():
    """H100: 50 MiB L2 + 33,792 KiB registers + 132 x 228 KiB shared memory."""
    expected = 50 * 2**20 + 33792 * 2**10 + 132 * 228 * 2**10
    assert CHIPS["h100-sxm-80gb"].sram_bytes() == expected
    a100 = 40 * 2**20 + 27648 * 2**10 + 108 * 164 * 2**10
    assert CHIPS["a100-sxm-80gb"].sram_bytes() == a100


# ------------------------------------------------------------------ model parameter counts
def params_from_shape(m: ModelPreset) -> int:
    """Parameters of a decoder-only transformer from its shape.

    h hidden, a heads of d = h / a, g key/value heads, f FFN width, V vocabulary, L layers,
    E experts (1 when dense), n_f = 3 FFN matrices when gated (SwiGLU) else 2:
      embedding V h (+ a learned position table s h), LM head V h unless tied,
      per layer: Q and O 2 h (a d), K and V 2 h (g d), FFN E n_f h f, router E h (MoE),
      two norms 2 h; with biases (GPT-3): Q, K, V, O 4 h, FFN f + h, norm biases 2 h;
      a final norm h (2 h with bias).
    """
    h, d, f, v = m.hidden, m.head_dim, m.ffn, m.vocab
    experts = max(m.num_expert, 1)
    n_f = 3 if m.gated else 2
    layer = 2 * h * m.heads * d + 2 * h * m.kv_heads * d + experts * n_f * h * f + 2 * h
    if m.num_expert:
        layer += m.num_expert * h
    if m.biases:
        layer += 4 * h + f + h + 2 * h
    total = m.layers * layer + v * h * (1 if m.tied else 2) + h * (2 if m.biases else 1)
    if m.learned_positions:
        total += int(m.seq_len.value) * h
    return total


@pytest.mark.parametrize("name", list(MODELS))
def test_parameter_count_of_the_shape_matches_the_published_size(name):
    model = MODELS[name]
    assert params_from_shape(model) / 1e9 == pytest.approx(model.params.value, rel=0.02)


def test_closed_form_on_llama3_8b_by_hand():
    """32 x (2*4096*4096 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 2*128000*4096 + 4096."""
    by_hand = 32 * (33554432 + 8388608 + 176160768 + 8192) + 1048576000 + 4096
    assert params_from_shape(MODELS["llama3-8b"]) == by_hand


# ------------------------------------------------------------------ expansion
LLAMA3_70B_ON_64_H100 = """\
[workload]
model = "llama3-70b"
global_batch_size = 1024
[system]
preset = "h100-sxm-80gb"
num_chip = 64
[[system.network]]
fabric = "nvlink"
size = 8
[[system.network]]
fabric = "infiniband"
size = 8
"""


def _expand(text: str) -> dict:
    return expand_presets(tomllib.loads(text), "spec.toml")


def test_twelve_line_llama3_70b_spec_loads():
    assert len(LLAMA3_70B_ON_64_H100.splitlines()) <= 12
    spec = spec_from_data(_expand(LLAMA3_70B_ON_64_H100), file="spec.toml", base_dir=Path("."))
    wl, sysm = spec.workload, spec.system
    assert (wl.hidden_dim, wl.num_head, wl.head_dim, wl.num_layer) == (8192, 64, 128, 80)
    assert (wl.seq_len, wl.vocab_size) == (8192, 128000)
    assert sysm.accelerator.peak_gflops == pytest.approx(989.4e3, rel=5e-3)
    # realistic model (the preset's default): 86.7 % of the 3,350 GB/s peak, the measured
    # 2,903 GB/s device-to-device copy the preset cites
    assert sysm.memory.dram_bw_GBps == pytest.approx(3350 * 0.867, rel=1e-9)
    assert sysm.memory.dram_bytes == 80e9
    assert [(d.topology.label, d.link_bw_GBps) for d in sysm.network] == [
        ("switch", 450.0), ("switch", 50.0)]
    assert spec.cost.chip_power_W == 700
    # the layer is Llama's: GQA with 8 KV heads (K is hidden x 8*128) and a SwiGLU FFN
    kernels = {k.name: k for k in spec.graph.kernels}
    assert "FFN_gate" in kernels and kernels["FFN_gate"].m * kernels["FFN_gate"].outer == 28672


def test_a_scale_up_fabric_gives_its_domain_size_unless_the_spec_says_otherwise():
    def sizes(num_chip: int, explicit: str = "") -> list:
        text = (f'[system]\npreset = "h100"\nnum_chip = {num_chip}\n'
                f'[[system.network]]\nfabric = "nvlink"\n{explicit}'
                '[[system.network]]\nfabric = "infiniband"\n')
        return [d.get("size") for d in _expand(text)["system"]["network"]]

    assert sizes(64) == [8, None]  # NVLink node of 8 GPUs; the scale-out size is searched
    assert sizes(64, "size = 4\n") == [4, None]  # an explicit size wins
    assert sizes(4) == [None, None]  # 8 does not divide 4 chips: left to the search


TRAINING_12_LINES = """\
[workload]
model = "llama3-70b"
global_batch_size = 1024
[system]
preset = "h100-sxm-80gb"
num_chip = 64
[[system.network]]
fabric = "nvlink"
[[system.network]]
fabric = "infiniband"
[training]
recompute = "full"
"""


@pytest.mark.slow
def test_twelve_line_training_spec_runs_to_a_mapping(tmp_path):
    """The docs' 12-line Llama-3-70B-on-64-H100 spec finds a feasible mapping on 8-GPU
    NVLink nodes."""
    from dfsearch import api

    assert len(TRAINING_12_LINES.splitlines()) == 12
    path = tmp_path / "l70.toml"
    path.write_text(TRAINING_12_LINES)
    r = api.run(api.load(path))
    ev = r.evaluation
    assert ev is not None and ev.decision.shape[0] == 8  # the NVLink domain, not searched
    assert ev.tp * ev.pp * ev.dp == 64 and 8 % ev.tp == 0


def test_word_bytes_picks_the_precision_peak():
    text = LLAMA3_70B_ON_64_H100 + "[execution]\nword_bytes = 1\n"
    accel = _expand(text)["system"]["accelerator"]
    got = peak_tflops(accel["systolic_width"], accel["systolic_height"], accel["cores"],
                      accel["freq_GHz"])
    assert got == pytest.approx(1978.9, rel=5e-3)


def test_explicit_keys_override_the_preset():
    text = LLAMA3_70B_ON_64_H100.replace(
        'global_batch_size = 1024', 'global_batch_size = 1024\nnum_layer = 40\nseq_len = 4096'
    ).replace("num_chip = 64", "num_chip = 64\n[system.memory]\ndram_bw_GBps = 3000")
    text = text.replace('fabric = "infiniband"', 'fabric = "infiniband"\nlink_bw_GBps = 25')
    data = _expand(text)
    assert data["workload"]["num_layer"] == 40 and data["workload"]["seq_len"] == 4096
    assert data["workload"]["hidden_dim"] == 8192  # not given: the model's
    assert data["system"]["memory"] == {"dram_bw_GBps": 3000, "dram_bytes": 80e9}
    assert data["system"]["network"][1]["link_bw_GBps"] == 25


def test_explicit_array_is_kept():
    data = expand_presets({"system": {"preset": "h100", "accelerator": {
        "systolic_width": 16, "systolic_height": 16}}}, "s.toml")
    accel = data["system"]["accelerator"]
    assert (accel["systolic_width"], accel["systolic_height"], accel["cores"]) == (16, 16, 132)


def test_decode_generator_takes_the_layer_shape():
    data = expand_presets({"workload": {"model": "llama2-70b"},
                           "graph": {"generator": "llm-decode", "seq_window": 64, "tp": 1}}, "s")
    assert data["graph"] == {"generator": "llm-decode", "seq_window": 64, "tp": 1,
                             "num_kv_head": 8, "mlp_dim": 28672, "gated_ffn": 1}
    msg = _error({"workload": {"model": "mixtral"}, "graph": {"generator": "llm-decode"}})
    assert "the llm-decode generator has dense layers only" in msg


def test_explicit_cores_and_clock_resize_the_array_to_the_same_peak():
    data = expand_presets({"system": {"preset": "h100", "accelerator": {
        "cores": 528, "freq_GHz": 1.83}}}, "s.toml")
    accel = data["system"]["accelerator"]
    assert (accel["systolic_width"], accel["systolic_height"]) == (16, 32)  # per tensor core


def test_expansion_is_pure():
    raw = tomllib.loads(LLAMA3_70B_ON_64_H100)
    before = repr(raw)
    expand_presets(raw, "spec.toml")
    assert repr(raw) == before


def test_specific_fabric_names_need_no_chip():
    data = expand_presets({"system": {"network": [{"fabric": "nvlink3", "size": 8}]}}, "s.toml")
    assert data["system"]["network"][0] == {"size": 8, "topology": "switch", "link_bw_GBps": 300.0}


def test_mixture_of_experts_model_fills_the_generator():
    data = expand_presets({"workload": {"model": "mixtral-8x7b", "global_batch_size": 8}}, "s")
    assert data["graph"] == {"generator": "llm", "num_kv_head": 8, "ffn_dim": 14336,
                             "gated_ffn": 1, "num_expert": 8, "top_k": 2}


def test_serving_workload_takes_the_layer_shape():
    data = expand_presets({"workload": {"model": "llama3.1-8b", "kind": "llm_serving",
                                        "phase": "decode"}}, "s")
    wl = data["workload"]
    assert (wl["num_kv_head"], wl["ffn_dim"], wl["gated_ffn"], wl["num_layer"]) == (8, 14336, 1, 32)
    assert data["graph"] == {"generator": "llm-serving"}


# ------------------------------------------------------------------ bad input
def _error(data: dict) -> str:
    with pytest.raises(SpecError) as e:
        expand_presets(data, "spec.toml")
    assert e.value.exit_code == 2
    return str(e.value)


def test_unknown_chip_names_the_field_value_names_and_suggestion():
    msg = _error({"system": {"preset": "h100-sxm-80"}})
    assert msg.startswith("spec.toml: system.preset must name a chip preset: one of ")
    assert "'a100-sxm-80gb'" in msg and "Got 'h100-sxm-80' instead." in msg
    assert "'a100'" not in msg  # aliases are accepted, not listed
    assert msg.endswith("Did you mean 'h100-sxm-80gb'?")
    assert "\n" not in msg


def test_unknown_model_and_fabric_are_reported_together():
    msg = _error({"workload": {"model": "llama3-7b"},
                  "system": {"preset": "h100", "network": [{"fabric": "infiniband-xdr"}]}})
    assert "2 problems" in msg
    assert "system.network[0].fabric must name a fabric preset" in msg
    assert "Got 'infiniband-xdr' instead. Did you mean 'infiniband-ndr'?" in msg
    assert "workload.model must name a model preset" in msg and "Got 'llama3-7b'" in msg


def test_a_name_that_is_not_a_string():
    msg = _error({"system": {"preset": 3}})
    assert "system.preset must name a chip preset" in msg and "Got 3 (not a string)" in msg


def test_family_name_without_a_chip_preset():
    msg = _error({"system": {"network": [{"fabric": "nvlink"}]}})
    assert "system.network[0].fabric 'nvlink' names the chip preset's network" in msg


def test_a_misspelt_chip_is_reported_once_not_again_by_its_fabrics():
    msg = _error({"system": {"preset": "h10", "network": [{"fabric": "nvlink"}]}})
    assert "system.preset" in msg and "fabric" not in msg


def test_family_the_chip_does_not_have():
    msg = _error({"system": {"preset": "mi300x", "network": [{"fabric": "nvlink"}]}})
    assert "must name a fabric of preset 'mi300x'" in msg and "'xgmi'" in msg


def test_precision_the_chip_does_not_have():
    msg = _error({"system": {"preset": "a100"}, "execution": {"word_bytes": 1}})
    assert ("execution.word_bytes must be a word size with a dense peak in preset "
            "'a100-sxm-80gb': one of 2 (bf16), 4 (fp32), 8 (fp64). Got 1 instead.") in msg


def test_unpublished_value_must_be_given():
    msg = _error({"system": {"preset": "b200"}})
    assert "system.accelerator.freq_GHz is required: preset 'b200' has no published value" in msg
    given = expand_presets({"system": {"preset": "b200", "accelerator": {
        "freq_GHz": 1.9, "sram_bytes": 1e8}}}, "s")["system"]["accelerator"]
    got = peak_tflops(given["systolic_width"], given["systolic_height"], 148, 1.9)
    assert got == pytest.approx(2250, rel=5e-3)


def test_model_with_a_workload_that_is_not_a_transformer():
    msg = _error({"workload": {"model": "llama2-7b", "kind": "fft"}})
    assert "workload.model needs workload.kind 'llm' or 'llm_serving'" in msg


# ------------------------------------------------------------------ import hygiene
def test_presets_import_only_errors_and_codes():
    code = ("import sys, dfsearch; before = set(sys.modules); import dfsearch.presets; "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('dfsearch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    new = set(eval(out.stdout))
    assert {m for m in new if not m.startswith("dfsearch.presets")} <= {
        "dfsearch.errors", "dfsearch.codes"}
