"""Fabric presets: the chip-to-chip networks of the chip presets, with their topology,
per-chip bandwidth per direction, hop latency and published achievable bus bandwidths.

A fabric fills one ``[[system.network]]`` dimension: ``topology``, ``link_bw_GBps`` (the
model's bandwidth of one chip's link per direction, docs/model.md "Network topologies") and,
where published, ``link_latency_ns``. ``family`` is the generic name a spec may use instead
(``fabric = "nvlink"``: the chip preset's scale-up NVLink).

>>> FABRICS["nvlink4"].link_bw_GBps(), FABRICS["infiniband-ndr"].link_bw_GBps()
(450.0, 50.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from dfsearch.codes import Collective, Topology
from dfsearch.presets.sourced import DERIVED, HOPPER_BLOG, Source, Sourced

__all__ = ["AllReduceCurve", "BusBandwidth", "FabricPreset", "FABRICS", "FAMILIES", "ROLES", "fabric_named"]


@dataclass(frozen=True, slots=True)
class BusBandwidth:
    """A measured bus bandwidth (nccl-tests ``busbw``) of one collective over ``group``
    chips."""

    collective: Collective
    group: int
    busbw: Sourced


@dataclass(frozen=True, slots=True)
class AllReduceCurve:
    """A measured all-reduce bus bandwidth (nccl-tests ``busbw``, GB/s) at each message size
    (bytes) over ``group`` chips: the realistic model's floor on an all-reduce's time
    (``dfsearch.system.alpha_beta``). ``quote``: one row of the source's table."""

    group: int
    sizes_bytes: tuple[float, ...]
    busbw_GBps: tuple[float, ...]
    source: Source
    quote: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class FabricPreset:
    """One network. ``bandwidth``: per chip and direction; ``domain``: the most chips one
    instance joins (None: no stated limit); ``role``: "scale-up" or "scale-out"."""

    name: str
    aliases: tuple[str, ...]
    family: str
    role: str
    description: str
    topology: Topology
    topology_source: Source  #: where the topology is stated
    topology_quote: str
    bandwidth: Sourced
    latency: Sourced
    domain: Sourced | None = None
    bus_bandwidth: tuple[BusBandwidth, ...] = ()
    all_reduce_curve: AllReduceCurve | None = None

    def link_bw_GBps(self) -> float:
        bw = self.bandwidth.in_base()
        assert bw is not None, self.name  # every fabric publishes its bandwidth
        return bw

    def bus_efficiency(self) -> float | None:
        """The realistic model's achievable fraction of the link bandwidth on this fabric:
        the highest published all-gather ``busbw`` over the line rate (the figure NCCL reaches
        on operations without in-switch reduction, so it holds for every collective), rounded
        to 3 digits; None when none is published (``execution.bus_efficiency`` applies)."""
        figures = [b.busbw.in_base() for b in self.bus_bandwidth
                   if b.collective is Collective.ALL_GATHER]
        figures = [f for f in figures if f is not None]
        return round(max(figures) / self.link_bw_GBps(), 3) if figures else None

    def sourced(self) -> tuple[Sourced, ...]:
        extra = (self.domain,) if self.domain is not None else ()
        return (self.bandwidth, self.latency, *extra,
                *(b.busbw for b in self.bus_bandwidth))


_NCCL_212 = Source("NVIDIA/nccl-tests issue #212, 'H100 all reduce performance' (maintainer "
                   "answer)", "https://github.com/NVIDIA/nccl-tests/issues/212")
_VOLTAGE_PARK = Source("Voltage Park / AI @ Georgia Tech, 'Voltage Park GPU benchmarking' "
                       "(8 x H100 SXM nodes)", "https://github.com/aigatech/vpbenchmarking")
_AZURE_ND = Source("G. Lockwood, 'Azure ND H100 v5' node page (cites Microsoft)",
                   "https://glennklockwood.com/garden/nodes/azure-nd-h100-v5")
_LOCKWOOD_B200 = Source("G. Lockwood, 'B200' (digital-garden page)",
                        "https://glennklockwood.com/garden/processors/B200")
_DGX_B200 = Source("AIPS wiki 'NVIDIA DGX B200' (quotes nvidia.com)",
                   "https://brent-newsom-nvidia.github.io/AIPS-Boom/wiki/NVIDIA-DGX-B200")
_MEGATRON = Source("D. Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU "
                   "Clusters Using Megatron-LM', SC'21", "https://arxiv.org/abs/2104.04473")
_TPU_V5P = Source("Google Cloud TPU documentation, 'TPU v5p'", "https://cloud.google.com/tpu/docs/v5p")
_GPU_BLOG = Source("gpu.blog, 'AMD Instinct MI300X' specification page",
                   "https://gpu.blog/gpus/instinct-mi300x-mi300x")
_EMERGENT = Source("emergentmind.com, 'AMD MI300X GPU' topic summary",
                   "https://www.emergentmind.com/topics/amd-mi300x-gpu")
_NCCL_1259 = Source("NVIDIA/nccl issue #1259, 'Is intra-node latency supposed to increase with "
                    "the number of GPUs when using NVLink SHARP?'",
                    "https://github.com/NVIDIA/nccl/issues/1259")

_AZURE_BENCH = "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/"
_AZURE_H200 = Source("Microsoft Azure, AI-benchmarking-guide, 'Azure ND H200 v5 Benchmark "
                     "Results', NCCL Bandwidth table (8 x H200, NCCL 2.20.5)",
                     _AZURE_BENCH + "ND_H200_v5_results.md")
#: the message sizes of the Azure table, '1K' to '8G': 1024 x 2^k bytes
_AZURE_SIZES = tuple(float(1024 * 2**k) for k in range(24))

_NO_LATENCY = ("per-hop latency: no primary figure was found; give link_latency_ns to model it "
               "(the all-reduce latency measured end to end is in bus_bandwidth notes)")


def _s(value: float | None, unit: str, source: Source | None, quote: str, note: str = "") -> Sourced:
    return Sourced(value, unit, source, quote, note)


def _h100_all_reduce() -> AllReduceCurve:
    busbw = (0.06, 0.12, 0.23, 0.47, 0.93, 1.84, 3.72, 7.39, 14.75, 29.38, 52.96, 88.78,
             138.44, 181.94, 240.41, 300.91, 368.11, 412.45, 432.24, 442.72, 467.58, 472.57,
             477.41, 479.98)
    return AllReduceCurve(8, _AZURE_SIZES, busbw, _AZURE_H200, "| 2M | 88.78 |",
                          "in-place all-reduce, NVLS; H200 has H100's NVLink 4 + NVSwitch "
                          "(900 GB/s per GPU), so the curve stands for the fabric")


def _no_latency() -> Sourced:
    return Sourced(None, "ns", None, "", _NO_LATENCY)


def _eight_gpu_switch(source: Source, quote: str) -> Sourced:
    return _s(8, "count", source, quote, "GPUs on one NVSwitch baseboard (HGX / DGX)")


def _nvlink3() -> FabricPreset:
    quote = "A100 includes 12 third-generation NVLink links to provide 600 GB/sec total bandwidth."
    return FabricPreset(
        name="nvlink3", aliases=("nvlink-a100",), family="nvlink", role="scale-up",
        description="NVLink 3 + NVSwitch (DGX / HGX A100): every GPU one hop from every other", topology=Topology.SWITCH,
        topology_source=HOPPER_BLOG, topology_quote=quote,
        bandwidth=_s(300, "GB/s", HOPPER_BLOG, quote,
                     f"{DERIVED}: 12 links x 25 GB/s per direction ('a single link delivering "
                     "25 GB/sec effective bandwidth in each direction')"),
        latency=_no_latency(),
        domain=_eight_gpu_switch(_MEGATRON, "Each node has eight NVIDIA Mellanox 200Gbps HDR "
                                 "Infiniband HCAs"),
    )


def _nvlink4() -> FabricPreset:
    quote = "H100 includes 18 fourth-generation NVLink links to provide 900 GB/sec total bandwidth."
    return FabricPreset(
        name="nvlink4", aliases=("nvlink-h100",), family="nvlink", role="scale-up",
        description="NVLink 4 + third-generation NVSwitch (DGX / HGX H100, H200)",
        topology=Topology.SWITCH,
        topology_source=HOPPER_BLOG, topology_quote=quote,
        bandwidth=_s(450, "GB/s", _NCCL_212, "450GB/s is the line rate.",
                     "per GPU and direction: 18 links x 25 GB/s"),
        latency=_no_latency(),
        domain=_eight_gpu_switch(_AZURE_ND, "8x 400G ConnectX-7 NDR InfiniBand HCAs"),
        bus_bandwidth=(
            BusBandwidth(Collective.ALL_REDUCE, 8, _s(480, "GB/s", _NCCL_212,
                         "On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s).",
                         "with NVLink SHARP (in-switch reduction); small-message all-reduce "
                         f"latency ~6 us on 2 GPUs ({_NCCL_1259.url})")),
            BusBandwidth(Collective.ALL_REDUCE, 8, _s(479.72, "GB/s", _VOLTAGE_PARK,
                         "AllReduce | 479.72 GB/s | Peak at 8 GiB message")),
            BusBandwidth(Collective.ALL_GATHER, 8, _s(370, "GB/s", _NCCL_212,
                         "NCCL can get an effective NVLink bandwidth of 370GB/s, which you can "
                         "observe as \"BusBw\" when running non-allreduce operations",
                         "about 82% of the 450 GB/s line rate")),
            BusBandwidth(Collective.ALL_GATHER, 8, _s(183.09, "GB/s", _VOLTAGE_PARK,
                         "AllGather | 183.09 GB/s | Peak at 256 MiB", "at 256 MiB only")),
        ),
        all_reduce_curve=_h100_all_reduce(),
    )


def _nvlink5() -> FabricPreset:
    return FabricPreset(
        name="nvlink5", aliases=("nvlink-b200",), family="nvlink", role="scale-up",
        description="NVLink 5 + NVSwitch (DGX / HGX B200)", topology=Topology.SWITCH,
        topology_source=_DGX_B200, topology_quote="Two NVIDIA NVSwitch devices with 14.4 TB/s "
                           "aggregate NVLink bandwidth.",
        bandwidth=_s(900, "GB/s", _LOCKWOOD_B200, "2x 900 GB/s NVLink 5 (D2D)",
                     "per GPU and direction (1.8 TB/s both directions)"),
        latency=_no_latency(),
        domain=_s(8, "count", _DGX_B200, "Two NVIDIA NVSwitch devices with 14.4 TB/s aggregate "
                  "NVLink bandwidth.", f"{DERIVED}: 14.4 TB/s / 1.8 TB/s per GPU = 8 GPUs"),
    )


def _ib(name: str, gbit: int, source: Source, quote: str, aliases: tuple[str, ...]) -> FabricPreset:
    return FabricPreset(
        name=name, aliases=aliases, family="infiniband", role="scale-out",
        description=f"{gbit} Gb/s InfiniBand per GPU, switched (fat tree)",
        topology=Topology.SWITCH,
        topology_source=source, topology_quote=quote,
        bandwidth=_s(gbit, "Gb/s", source, quote, "per GPU and direction"),
        latency=_no_latency(),
    )


def _ib_ndr() -> FabricPreset:
    base = _ib("infiniband-ndr", 400, _AZURE_ND, "8x 400G ConnectX-7 NDR InfiniBand HCAs",
               ("ndr", "ib-ndr"))
    measured = BusBandwidth(Collective.ALL_REDUCE, 32, _s(330.93, "GB/s", _VOLTAGE_PARK,
                            "AllReduce | 330.93 GB/s | 69% efficiency",
                            "4 nodes x 8 H100: NVLink inside the nodes, NDR between them"))
    return FabricPreset(**{**_fields(base), "bus_bandwidth": (measured,)})


def _fields(f: FabricPreset) -> dict:
    return {k: getattr(f, k) for k in FabricPreset.__dataclass_fields__}


def _infinity_fabric() -> FabricPreset:
    return FabricPreset(
        name="infinity-fabric", aliases=("infinity-fabric-mi300x",), family="xgmi", role="scale-up",
        description="AMD Infinity Fabric (xGMI), 8 GPUs fully connected", topology=Topology.FC,
        topology_source=_GPU_BLOG, topology_quote="Topology: Fully-connected 8-GPU xGMI mesh "
                           "(HGX MI300X platform)",
        bandwidth=_s(64, "GB/s", _EMERGENT, "supporting up to 128 GB/s bidirectional per link",
                     f"{DERIVED}: per link and direction, 128 / 2 (secondary source)"),
        latency=_no_latency(),
        domain=_s(8, "count", _GPU_BLOG, "Max GPUs/Node8"),
    )


def _ici_v5p() -> FabricPreset:
    quote = "| Bidirectional inter-chip interconnect (ICI) bandwidth per chip (GBps) | 1200 |"
    return FabricPreset(
        name="ici-v5p", aliases=("ici-tpu-v5p",), family="ici", role="scale-up",
        description="TPU v5p inter-chip interconnect: a 3-D torus, each dimension a ring",
        topology=Topology.RING,
        topology_source=_TPU_V5P, topology_quote="There are 8960 chips in a v5p Pod.",
        bandwidth=_s(100, "GB/s", _TPU_V5P, quote,
                     f"{DERIVED}: per link and direction, 1200 GB/s / (6 torus links x 2 "
                     "directions), assuming equal links"),
        latency=_no_latency(),
    )


def _dcn_v5p() -> FabricPreset:
    quote = "| Data center network (DCN) bandwidth per chip (Gbps) | 50 |"
    return FabricPreset(
        name="dcn-v5p", aliases=("dcn-tpu-v5p",), family="dcn", role="scale-out",
        description="TPU v5p data-centre network between slices", topology=Topology.SWITCH,
        topology_source=_TPU_V5P, topology_quote=quote,
        bandwidth=_s(50, "Gb/s", _TPU_V5P, quote),
        latency=_no_latency(),
    )


def _catalogue() -> MappingProxyType:
    fabrics = (
        _nvlink3(), _nvlink4(), _nvlink5(),
        _ib("infiniband-hdr", 200, _MEGATRON, "Each node has eight NVIDIA Mellanox 200Gbps HDR "
            "Infiniband HCAs for application communication", ("hdr", "ib-hdr")),
        _ib_ndr(), _infinity_fabric(), _ici_v5p(), _dcn_v5p(),
    )
    return MappingProxyType({f.name: f for f in fabrics})


#: fabric preset name -> preset
FABRICS = _catalogue()
#: generic names that resolve through the chip preset: family -> its fabric of that family
FAMILIES = ("nvlink", "infiniband", "xgmi", "ici", "dcn")
#: role names that resolve through the chip preset: its scale-up or scale-out fabric
ROLES = ("scale-up", "scale-out")


def fabric_named(name: str) -> FabricPreset | None:
    """The fabric called ``name`` or one of its aliases (case-insensitive), else None."""
    key = name.lower()
    return next((f for f in FABRICS.values() if key == f.name or key in f.aliases), None)
