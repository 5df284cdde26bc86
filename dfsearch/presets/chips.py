"""Chip presets: published peaks, memories, on-chip SRAM, clocks and measured efficiencies.

Every number is a :class:`~dfsearch.presets.sourced.Sourced` read from a public source (the
quote is the text it was read from); ``docs/presets.md`` tabulates them and says how a chip
becomes the model's accelerator (``dfsearch.presets.represent``). Peaks are dense (no
structured sparsity), keyed by the word size that picks them (``execution.word_bytes``).

>>> CHIPS["h100-sxm-80gb"].peak(2).value, CHIPS["h100-sxm-80gb"].peak(1).value
(989.4, 1978.9)
>>> chip_named("H100").name
'h100-sxm-80gb'
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from dfsearch.presets.sourced import DERIVED, HOPPER_BLOG, Source, Sourced

__all__ = ["Peak", "SramPart", "ChipPreset", "CHIPS", "chip_named", "GENERAL_MEASURED"]


@dataclass(frozen=True, slots=True)
class Peak:
    """The dense peak of one precision; ``word_bytes`` is the spec's ``execution.word_bytes``
    that selects it."""

    word_bytes: int
    precision: str
    tflops: Sourced


@dataclass(frozen=True, slots=True)
class SramPart:
    """One on-chip memory counted in ``sram_bytes``; ``per_core``: the amount is per SM / CU
    and is multiplied by the core count."""

    what: str
    amount: Sourced
    per_core: bool = False


@dataclass(frozen=True, slots=True)
class ChipPreset:
    """One accelerator. ``cores`` is the count of compute units the model's ``cores`` stands
    for (SMs, CUs, MXUs, PCUs), ``clock`` the clock its peaks are stated at; ``measured``
    holds published efficiencies (not read by the model yet)."""

    name: str
    aliases: tuple[str, ...]
    description: str
    peaks: tuple[Peak, ...]
    cores: Sourced
    clock: Sourced
    hbm_capacity: Sourced
    hbm_bandwidth: Sourced
    sram: tuple[SramPart, ...]
    tdp: Sourced
    scale_up: str | None  #: fabric preset name of the scale-up domain
    scale_out: str | None  #: fabric preset name of the scale-out network
    measured: tuple[tuple[str, Sourced], ...] = ()

    def peak(self, word_bytes: int) -> Sourced | None:
        """The dense peak for ``word_bytes``-byte words, None when the chip has none."""
        return next((p.tflops for p in self.peaks if p.word_bytes == word_bytes), None)

    def sram_bytes(self) -> float | None:
        """Sum of the on-chip memories (bytes); None when one of them is not published."""
        cores = self.cores.in_base()
        total = 0.0
        for part in self.sram:
            amount = part.amount.in_base()
            if amount is None or (part.per_core and cores is None):
                return None
            total += amount * (cores if part.per_core else 1.0)
        return total if self.sram else None

    def sourced(self) -> tuple[Sourced, ...]:
        """Every number of the preset (tests check each has a source)."""
        out = [p.tflops for p in self.peaks] + [self.cores, self.clock, self.hbm_capacity]
        out += [self.hbm_bandwidth, self.tdp] + [s.amount for s in self.sram]
        return tuple(out + [m for _, m in self.measured])


# --------------------------------------------------------------------------- sources
_LOCKWOOD_H100 = Source("G. Lockwood, 'H100' (digital-garden page; cites NVIDIA documents)",
                        "https://glennklockwood.com/garden/processors/h100")
_LOCKWOOD_A100 = Source("G. Lockwood, 'A100' (digital-garden page; cites NVIDIA documents)",
                        "https://glennklockwood.com/garden/processors/A100")
_LOCKWOOD_B200 = Source("G. Lockwood, 'B200' (digital-garden page; HGX B200 at 1,000 W)",
                        "https://glennklockwood.com/garden/processors/B200")
_THUNDER = Source("Thunder Compute, 'NVIDIA A100 Specifications' (A100 variants table)",
                  "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide")
_AZURE_GB200 = Source(
    "Microsoft Azure HPC blog, 'Unpacking NVIDIA GB200 GPU performance on Azure virtual "
    "machines' (2025)",
    "https://techcommunity.microsoft.com/blog/azurehighperformancecomputingblog/"
    "unpacking-nvidia-gb200-gpu-performance-on-azure-virtual-machines/4390442")
_AZURE_GB200_INF = Source(
    "Microsoft Azure HPC blog, 'Azure's ND GB200 v6 delivers record performance for "
    "inference workloads' (2025)",
    "https://techcommunity.microsoft.com/blog/azurehighperformancecomputingblog/"
    "azure%E2%80%99s-nd-gb200-v6-delivers-record-performance-for-inference-workloads/4399253")
_VOLTAGE_PARK = Source("Voltage Park / AI @ Georgia Tech, 'Voltage Park GPU benchmarking' "
                       "(8 x H100 SXM nodes)", "https://github.com/aigatech/vpbenchmarking")
_LLAMA3 = Source("Llama Team, AI @ Meta, 'The Llama 3 Herd of Models' (2024)",
                 "https://arxiv.org/abs/2407.21783")
_MEGATRON = Source("D. Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU "
                   "Clusters Using Megatron-LM', SC'21", "https://arxiv.org/abs/2104.04473")
_H200_WIKI = Source("AI Wiki, 'NVIDIA H200' (cites NVIDIA product pages)",
                    "https://aiwiki.ai/wiki/nvidia_h200")
_H200_SPECS = Source("lzwjava, 'NVIDIA H200 GPU Specifications and Features' (H100 vs H200 "
                     "table)", "https://lzwjava.github.io/nvidia-h200-gpu-specs-en")
_H200_SMS = Source("saulelectric.com, 'NVIDIA H200' product page",
                   "https://www.saulelectric.com/nvidia-h200.html")
_CHIPS_CHEESE_B200 = Source("Chips and Cheese, 'Nvidia's B200: Keeping the CUDA Juggernaut "
                            "Rolling' (2025; read via a mirror)",
                            "https://vuink.com/post/puvcfnaqpurrfr-d-dpbz/p/"
                            "nvidias-b200-keeping-the-cuda-juggernaut")
_ROCM_MI300 = Source("AMD ROCm documentation, 'AMD Instinct MI300 series microarchitecture' "
                     "(mi300.md; read via a summary quoting it)",
                     "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html")
_ROCM_SPECS = Source("AMD ROCm documentation, 'AMD GPU specifications' (CDNA3 gfx942 rows)",
                     "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html")
_WATKINS = Source("J. Watkins, 'AMD Instinct MI300 Series' research notes",
                  "https://www.jaredwatkins.com/research/ai-accelerators/amd-instinct/"
                  "mi300-series/")
_MI300A_CLOCK = Source("vengineer blog, MI300A/MI300X summary quoting AMD's MI300A data "
                       "(same CDNA3 XCD)", "https://vengineer.hatenablog.com/entry/2023/12/11/080000")
_STH = Source("ServeTheHome, 'AMD Instinct MI300X GPU and MI300A APUs launched for AI era'",
              "https://servethehome.com/amd-instinct-mi300x-gpu-and-mi300a-apus-launched-for-ai-era/3")
_GPU_BLOG = Source("gpu.blog, 'AMD Instinct MI300X' specification page",
                   "https://gpu.blog/gpus/instinct-mi300x-mi300x")
_TPU_V5P = Source("Google Cloud TPU documentation, 'TPU v5p'", "https://cloud.google.com/tpu/docs/v5p")
_TPU_ARCH = Source("Google Cloud TPU documentation, 'System architecture'",
                   "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm")
_SN40L = Source("R. Prabhakar (SambaNova), 'SambaNova SN40L RDU', Hot Chips 2024 slides "
                "(secondary copy)", "https://www.sgpjbg.com/baogao/465014.html")
_SN40L_DAC = Source("DAC'25 talk abstract 'SambaNova SN40L'",
                    "https://62dac.conference-program.com/presentation/?id=SSSN027&sess=sess258")

_NOT_FOUND = "not published in the sources read"


def _s(value: float | None, unit: str, source: Source | None, quote: str, note: str = "") -> Sourced:
    return Sourced(value, unit, source, quote, note)


def _missing(unit: str, note: str = _NOT_FOUND) -> Sourced:
    return Sourced(None, unit, None, "", note)


# --------------------------------------------------------------------------- measured
_GEMM_NOTE = ("GEMM efficiency by shape and precision (tile and wave quantisation): no "
              "published table was found; the realistic execution model will need one")
_LAUNCH_NOTE = ("no published figure for this chip; see GENERAL_MEASURED "
                "'kernel_launch_overhead_*'")

#: published measurements that are not about one chip of the catalogue
GENERAL_MEASURED: tuple[tuple[str, Sourced], ...] = (
    ("kernel_launch_overhead_v100_pytorch", _s(20, "us", Source(
        "groundy.com, 'Every CUDA Kernel Pays a Launch Tax' (quotes an NVIDIA measurement)",
        "https://groundy.com/articles/every-cuda-kernel-pays-a-launch-tax-the-host-to-device-"
        "walkthrough/"),
        "NVIDIA's own measurement of a PyTorch element-wise kernel put that round trip at "
        "roughly 20 microseconds on a Tesla V100",
        "includes the PyTorch dispatcher; not an H100 number")),
    ("kernel_launch_overhead_cuda_runtime", _s(5, "us", Source(
        "susun-blog, 'pegainfer (3): From Launch Overhead to CUDA Graph'",
        "https://susun-blog.com/blog/pegainfer-3-cuda-graph"),
        "This process takes about 4-6 μs.",
        "CUDA runtime launch on a consumer GPU (RTX 5070 Ti); the middle of 4-6 us")),
)


def _measured_hopper() -> tuple[tuple[str, Sourced], ...]:
    return (
        ("hbm_achievable_fraction", _s(0.867, "fraction", _VOLTAGE_PARK,
                                       "GPU D2D (HBM3) | 2,903 GB/s | 86.7% of HBM3 peak")),
        ("llama3_405b_bf16_mfu", _s(0.43, "fraction", _LLAMA3,
                                    "8,192 8 1 16 64 8,192 32 16M 430 43%",
                                    "Table 4: 430 TFLOP/s per GPU at 8,192 GPUs, model FLOPs")),
        ("gemm_efficiency", _missing("fraction", _GEMM_NOTE)),
        ("kernel_launch_overhead", _missing("us", _LAUNCH_NOTE)),
    )


# --------------------------------------------------------------------------- chips
def _a100() -> ChipPreset:
    blog = HOPPER_BLOG
    return ChipPreset(
        name="a100-sxm-80gb", aliases=("a100", "a100-80gb", "a100-sxm"),
        description="NVIDIA A100 SXM4 80 GB (Ampere)",
        peaks=(
            Peak(2, "bf16", _s(312, "TFLOP/s", blog, "Peak BF16 Tensor TFLOPS with FP32 "
                               "Accumulate ... 312/624", "dense/sparse")),
            Peak(4, "fp32", _s(19.5, "TFLOP/s", blog, "Peak FP32 TFLOPS (non-Tensor) ... 19.5")),
            Peak(8, "fp64", _s(19.5, "TFLOP/s", blog, "Peak FP64 Tensor TFLOPS ... 19.5")),
        ),
        cores=_s(108, "count", blog, "SMs ... 108"),
        clock=_s(1410, "MHz", blog, "GPU Boost Clock ... 1410 MHz"),
        hbm_capacity=_s(80, "GB", _LOCKWOOD_A100, "80 GB HBM2e (5 stacks)"),
        hbm_bandwidth=_s(2039, "GB/s", _THUNDER, "Memory Bandwidth | 1,555GB/s | 1,935GB/s | "
                         "1,555GB/s | 2,039GB/s", "columns PCIe 40GB, PCIe 80GB, SXM 40GB, SXM 80GB"),
        sram=(
            SramPart("L2 cache", _s(40, "MiB", blog, "L2 Cache Size ... 40 MB",
                                    "NVIDIA's MB of on-chip memory are 2^20 bytes")),
            SramPart("register file", _s(27648, "KiB", blog, "Register File Size / GPU ... 27648 KB")),
            SramPart("shared memory per SM", _s(164, "KiB", blog, "Shared Memory Size / SM ... "
                                                "Configurable up to 164 KB"), per_core=True),
        ),
        tdp=_s(400, "W", blog, "TDP ... 400 Watts"),
        scale_up="nvlink3", scale_out="infiniband-hdr",
        measured=(
            ("megatron_end_to_end_fraction", _s(0.52, "fraction", _MEGATRON,
                                                "We achieve 52% of peak device throughput for the "
                                                "largest model", "hardware FLOPs incl. recompute")),
            ("gemm_efficiency", _missing("fraction", _GEMM_NOTE)),
            ("kernel_launch_overhead", _missing("us", _LAUNCH_NOTE)),
        ),
    )


def _h100_peaks() -> tuple[Peak, ...]:
    lw = _LOCKWOOD_H100
    return (
        Peak(2, "bf16", _s(989.4, "TFLOP/s", lw, "BF16 | 133.8 | 989.4 | 1978.9 |",
                           "columns VFMA | Matrix | Sparse")),
        Peak(1, "fp8", _s(1978.9, "TFLOP/s", lw, "FP8 | 1978.9 | 3957.8",
                          "dense, sparse; NVIDIA's datasheet 3,958 is with sparsity")),
        Peak(4, "fp32", _s(66.9, "TFLOP/s", lw, "FP32 | 66.9 |")),
        Peak(8, "fp64", _s(66.9, "TFLOP/s", lw, "FP64 | 33.5 | 66.9", "FP64 tensor")),
    )


def _hopper_sram() -> tuple[SramPart, ...]:
    blog = HOPPER_BLOG
    return (
        SramPart("L2 cache", _s(50, "MiB", blog, "L2 Cache Size ... 50 MB",
                                "NVIDIA's MB of on-chip memory are 2^20 bytes")),
        SramPart("register file", _s(33792, "KiB", blog, "Register File Size / GPU ... 33792 KB")),
        SramPart("shared memory per SM", _s(228, "KiB", blog, "Shared Memory Size / SM ... "
                                            "Configurable up to 228 KB"), per_core=True),
    )


def _h100() -> ChipPreset:
    return ChipPreset(
        name="h100-sxm-80gb", aliases=("h100", "h100-80gb", "h100-sxm"),
        description="NVIDIA H100 SXM5 80 GB (Hopper)",
        peaks=_h100_peaks(),
        cores=_s(132, "count", HOPPER_BLOG, "SMs ... 132"),
        clock=_s(1830, "MHz", _LOCKWOOD_H100, "1.83 GHz (low precision), 1.98 GHz (high "
                 "precision)", "the tensor-core peaks are stated at 1.83 GHz"),
        hbm_capacity=_s(80, "GB", _LLAMA3, "each running at 700W TDP with 80GB HBM3"),
        hbm_bandwidth=_s(3350, "GB/s", _LOCKWOOD_H100, "3.35 TB/s (max)"),
        sram=_hopper_sram(),
        tdp=_s(700, "W", HOPPER_BLOG, "TDP ... 700 Watts"),
        scale_up="nvlink4", scale_out="infiniband-ndr",
        measured=_measured_hopper(),
    )


def _h200() -> ChipPreset:
    same_die = "H200 has the GH100 compute of the H100 SXM (it differs only in memory)"
    h100 = _h100()
    return ChipPreset(
        name="h200-sxm-141gb", aliases=("h200", "h200-141gb", "h200-sxm"),
        description="NVIDIA H200 SXM 141 GB (Hopper, HBM3e)",
        peaks=tuple(Peak(p.word_bytes, p.precision, Sourced(
            p.tflops.value, p.tflops.unit, p.tflops.source, p.tflops.quote,
            f"{same_die}; {_H200_SPECS.citation}: '| FP8 Tensor Core | 3,958 TFLOPS* | "
            "3,958 TFLOPS* | Identical |'")) for p in h100.peaks),
        cores=_s(132, "count", _H200_SMS, "Streaming Multiprocessors (SMs): 132"),
        clock=Sourced(1830, "MHz", _LOCKWOOD_H100, h100.clock.quote, same_die),
        hbm_capacity=_s(141, "GB", _H200_WIKI, "packing 141 GB at 4.8 TB/s on its SXM and NVL boards"),
        hbm_bandwidth=_s(4800, "GB/s", _H200_WIKI, "packing 141 GB at 4.8 TB/s on its SXM and "
                         "NVL boards"),
        sram=_hopper_sram(),
        tdp=_s(700, "W", _H200_SPECS, "| TDP (Power) | 700W | 700W | Identical |"),
        scale_up="nvlink4", scale_out="infiniband-ndr",
        measured=(("gemm_efficiency", _missing("fraction", _GEMM_NOTE)),
                  ("kernel_launch_overhead", _missing("us", _LAUNCH_NOTE))),
    )


def _b200() -> ChipPreset:
    lw = _LOCKWOOD_B200
    return ChipPreset(
        name="b200", aliases=("b200-180gb", "hgx-b200"),
        description="NVIDIA B200 (Blackwell), HGX board at 1,000 W",
        peaks=(
            Peak(2, "bf16", _s(2250, "TFLOP/s", lw, "BF16 | 2250 | 4500 |", "HGX B200 at 1,000 W")),
            Peak(1, "fp8", _s(4500, "TFLOP/s", lw, "FP8 | 4500 | 9000 |")),
            Peak(4, "fp32", _s(80, "TFLOP/s", lw, "FP32 | 80 |")),
            Peak(8, "fp64", _s(40, "TFLOP/s", lw, "FP64 | 40 | 40 |")),
        ),
        cores=_s(148, "count", _CHIPS_CHEESE_B200, "B200 enables 74 SMs per die, giving 148 SMs "
                 "across the GPU."),
        clock=_missing("MHz", "no clock was found in the sources read: give "
                       "system.accelerator.freq_GHz"),
        hbm_capacity=_s(180, "GB", Source(
            "NVIDIA TensorRT-LLM, docs/source/performance/perf-overview.md (hardware section)",
            "https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6"
            "/docs/source/performance/perf-overview.md"), "B200 180GB (DGX B200)",
            "usable capacity; Lockwood lists 192 GB physical"),
        hbm_bandwidth=_s(8000, "GB/s", lw, "8 TB/s (max)"),
        sram=(SramPart("L2 cache", _missing("MiB")),),
        tdp=_s(1000, "W", lw, "1000 W maximum"),
        scale_up="nvlink5", scale_out="infiniband-ndr",
        measured=(
            ("gb200_fp8_gemm_fraction", _s(0.565, "fraction", _AZURE_GB200,
                                           "demonstrated a sustained 2,744 TFLOPS for FP8 workloads",
                                           f"{DERIVED}: 2,744 / 4,856 (Azure's GB200 FP8 peak); "
                                           "GB200 at 1,200 W, not HGX B200")),
            ("hbm_achievable_fraction", _s(0.92, "fraction", _AZURE_GB200_INF,
                                           "we measured 7.35 TB/s HBM bandwidth utilization "
                                           "(92% efficiency)", "GB200")),
            ("kernel_launch_overhead", _missing("us", _LAUNCH_NOTE)),
        ),
    )


def _mi300x() -> ChipPreset:
    return ChipPreset(
        name="mi300x", aliases=("mi300x-192gb", "amd-mi300x"),
        description="AMD Instinct MI300X 192 GB (CDNA3)",
        peaks=(
            Peak(2, "bf16", _s(1307.4, "TFLOP/s", _ROCM_MI300, "Matrix FP16/BF16: 1307.4 TFLOPS",
                               "dense; translated from a summary in Chinese that quotes mi300.md")),
            Peak(1, "fp8", _s(2614.9, "TFLOP/s", _ROCM_MI300, "Matrix FP8: 2614.9 TFLOPS",
                              "translated, as above")),
        ),
        cores=_s(304, "count", _GPU_BLOG, "featuring 304 high-throughput compute units"),
        clock=_s(2100, "MHz", _MI300A_CLOCK, "Peak Engine Clock : 2100 MHz",
                 "stated for the MI300A, whose XCDs are the MI300X's"),
        hbm_capacity=_s(192, "GB", _WATKINS, "Memory (MI300X): 192 GB HBM3, 5.3 TB/s bandwidth"),
        hbm_bandwidth=_s(5300, "GB/s", _WATKINS, "Memory (MI300X): 192 GB HBM3, 5.3 TB/s bandwidth"),
        sram=(
            SramPart("L2 cache", _s(32, "MiB", _ROCM_SPECS, "| 32 (4 per XCD) |", "MI325X row, "
                                    "same gfx942 die")),
            SramPart("Infinity Cache", _s(256, "MiB", _STH, "AMD also has the 256MB of Infinity "
                                          "Cache with 17TB/s of peak bandwidth.")),
            SramPart("LDS per CU", _s(64, "KiB", _ROCM_SPECS, "304 (38 per XCD) | 64 | 64 |"),
                     per_core=True),
        ),
        tdp=_s(750, "W", _WATKINS, "TDP: 750W (MI300X)"),
        scale_up="infinity-fabric", scale_out="infiniband-ndr",
        measured=(("gemm_efficiency", _missing("fraction", _GEMM_NOTE)),),
    )


def _tpu_v5p() -> ChipPreset:
    return ChipPreset(
        name="tpu-v5p", aliases=("v5p", "tpuv5p"),
        description="Google TPU v5p (2 TensorCores of 4 MXUs each)",
        peaks=(
            Peak(2, "bf16", _s(459, "TFLOP/s", _TPU_V5P, "| Peak compute per chip (BF16) "
                               "(TFLOPs) | 459 |")),
            Peak(1, "fp8", _s(459, "TFLOP/s", _TPU_V5P, "| Peak compute per chip (FP8) (TFLOPs) "
                              "| 459 |", "no FP8 speed-up")),
        ),
        cores=_s(8, "count", _TPU_V5P, "| Number of TensorCores per chip | 2 | ... Each "
                 "TensorCore has four Matrix Multiply Units (MXU)",
                 f"{DERIVED}: 2 TensorCores x 4 MXUs; each MXU is 128 x 128 ({_TPU_ARCH.url}: "
                 "'An MXU is composed of 128 x 128 multiply-accumulators in a systolic array.')"),
        clock=_s(1750.9, "MHz", _TPU_V5P, "| Peak compute per chip (BF16) (TFLOPs) | 459 |",
                 f"{DERIVED}: 459e12 / (2 x 8 MXUs x 128 x 128) Hz; the clock is not published"),
        hbm_capacity=_s(95, "GiB", _TPU_V5P, "| HBM capacity per chip (GiB) | 95 |"),
        hbm_bandwidth=_s(2765, "GB/s", _TPU_V5P, "| HBM bandwidth per chip (GBps) | 2765 |"),
        sram=(SramPart("vector memory", _missing("MiB")),),
        tdp=_missing("W"),
        scale_up="ici-v5p", scale_out="dcn-v5p",
    )


def _sn40l() -> ChipPreset:
    return ChipPreset(
        name="sn40l", aliases=("sambanova-sn40l",),
        description="SambaNova SN40L RDU (one socket)",
        peaks=(Peak(2, "bf16", _s(638, "TFLOP/s", _SN40L, "638 TFLOPS(bf16)")),),
        cores=_s(1040, "count", _SN40L, "SN40L Chip: Tile Architecture 1040 PCUs and PMUs"),
        clock=_missing("MHz", "no clock was found in the sources read: give "
                       "system.accelerator.freq_GHz"),
        hbm_capacity=_s(64, "GB", _SN40L, "64 GB High Bandwidth Memory"),
        hbm_bandwidth=_missing("GB/s", "the slide copy read garbles which bandwidth belongs to "
                               "which memory tier: give system.memory.dram_bw_GBps"),
        sram=(SramPart("on-chip memory", _s(520, "MiB", _SN40L, "520 MB On-Chip Memory")),),
        tdp=_missing("W"),
        scale_up=None, scale_out=None,
        measured=(("decode_fraction_of_peak", _s(0.75, "fraction", _SN40L_DAC,
                                                 "achieving over 75% of peak performance during "
                                                 "token generation on 8 and 16 RDUs")),),
    )


def _catalogue() -> MappingProxyType:
    chips = (_a100(), _h100(), _h200(), _b200(), _mi300x(), _tpu_v5p(), _sn40l())
    return MappingProxyType({c.name: c for c in chips})


#: chip preset name -> preset, in catalogue order
CHIPS = _catalogue()


def chip_named(name: str) -> ChipPreset | None:
    """The preset called ``name`` or one of its aliases (case-insensitive), else None."""
    key = name.lower()
    return next((c for c in CHIPS.values() if key == c.name or key in c.aliases), None)
