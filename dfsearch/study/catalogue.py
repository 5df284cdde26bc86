"""The built-in catalogue of the DFModel paper's design space: accelerators, memories,
interconnects and network topologies, as named presets a study axis can list
(``accelerator = ["h100", "tpu_v4", "sn30", "wse2"]``).

Source of every number: DFModel's published design-space inputs, repository
``fengqian-ayce/DFModel`` at commit ``04f93d5ea1179ff967e26116b09853db972a2fb0``, files
``LLM/DSE/system/<chip>/<topology>_<memory>_<network>/user_input/setup.txt`` (GPT-3 1T on
1024 chips; ``<chip>`` is ``h100``, ``tpu``, ``sn30``, ``wse-2``; ``<topology>`` is
``2d_torus``, ``3d_torus``, ``dragonfly``, ``dgx_1``, ``dgx_2``; ``<memory>_<network>`` is
``ddr_pcie``, ``ddr_nvlink``, ``hbm_pcie``, ``hbm_nvlink``). Each preset names the file it was
read from in ``source``. Which file gave which number:

* accelerators: ``<chip>/2d_torus_hbm_nvlink`` (``system.accelerator``, ``cost.accelerator_price``,
  ``cost.accelerator_power``, ``miscellany.execution_style`` and ``num_config``); the chip's
  fields are identical in every topology / memory / network folder read (h100: all five
  topologies and three memory-network pairs);
* memories: ``h100/2d_torus_ddr_pcie`` (DDR) and ``h100/2d_torus_hbm_nvlink`` (HBM):
  ``system.memory``, ``cost.dram_unit_price``, ``cost.dram_unit_power``;
* interconnects: ``h100/2d_torus_hbm_pcie`` / ``h100/3d_torus_hbm_pcie`` (PCIe: every
  dimension 50 GB/s at 0.052 J/GB) and ``h100/2d_torus_hbm_nvlink`` (NVLink: the first, tensor
  parallel, dimension 450 GB/s at 0.0104 J/GB, the others as PCIe); ``nvlink_all``, every
  dimension 450 GB/s at 0.0104 J/GB, is the NVLink of the DLRM, HPL and FFT design-space
  files (``DLRM/DSE/system/h100/<topology>_hbm_nvlink``, ``FFT/...``, ``HPL/...``);
* topologies: ``h100/<topology>_hbm_nvlink``: the variant (``r_r``, ``r_r_r``, ``fc_fc``,
  ``r_sw``, ``sw_sw``), sizes and ``par_*`` roles; prices ``link_unit_price`` 2.0 and
  ``switch_unit_price`` 24.0 and ``switch_unit_power`` 0.052 are the same in every file.

The published DLRM, HPL and FFT design-space runs (``DLRM/DSE/system/...``, ``HPL/...``,
``FFT/...``) use the same chips with other network sizes (DLRM and FFT: 32 x 32, 8 x 8 x 16,
8 x 128; HPL: 32 x 32 everywhere but 4 x 8 x 32 for the 3-D torus) and some per-workload
settings: SN30 runs them kernel by kernel, the HPL folders give the H100 167,772,160 B of SRAM
and the WSE-2 a larger HPL problem. A study gives the sizes in its ``[networks]`` table and the
rest in ``[[override]]`` tables (the shipped ``dlrm_grid``, ``hpl_grid`` and ``fft_grid`` studies
cite each file).

Deviations, stated: the published inputs do not agree among themselves on ``compute_util``
(commented out in some folders, 0.9 in others) and ``tile_size`` (2048 in some): the presets
leave both to the base spec. A preset changes only the fields listed in its ``edits``.

>>> sorted(PRESETS)
['accelerator', 'interconnect', 'memory', 'style', 'topology']
>>> ACCELERATORS["sn30"].peak_gflops
614400.0
>>> [d["topology"] for d in TOPOLOGIES["dgx1"].dims]
['ring', 'switch']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "REPO",
    "COMMIT",
    "Chip",
    "MemoryPreset",
    "LinkPreset",
    "TopologyPreset",
    "StylePreset",
    "STYLES",
    "ACCELERATORS",
    "MEMORIES",
    "INTERCONNECTS",
    "TOPOLOGIES",
    "PRESETS",
    "ORDER",
    "preset_edits",
]

REPO = "fengqian-ayce/DFModel"
COMMIT = "04f93d5ea1179ff967e26116b09853db972a2fb0"
_DIR = "LLM/DSE/system"
#: workload kinds whose network dimensions carry tp/pp/dp roles
LLM_KINDS = ("llm", "llm_serving")


def _src(folder: str) -> str:
    return f"{_DIR}/{folder}/user_input/setup.txt"


@dataclass(frozen=True, slots=True)
class Chip:
    """One accelerator of the paper with its price, power and execution style."""

    name: str
    cores: int
    systolic_width: int
    systolic_height: int
    sram_bytes: float
    freq_GHz: float
    price: float  #: $ per chip
    power_W: float
    style: str  #: "dataflow" or "kernel_by_kernel"
    num_config: int  #: 0 = one configuration per kernel
    source: str

    @property
    def peak_gflops(self) -> float:
        return 2.0 * self.systolic_width * self.systolic_height * self.cores * self.freq_GHz

    def edits(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "system.accelerator.cores": self.cores,
            "system.accelerator.systolic_width": self.systolic_width,
            "system.accelerator.systolic_height": self.systolic_height,
            "system.accelerator.sram_bytes": self.sram_bytes,
            "system.accelerator.freq_GHz": self.freq_GHz,
            "cost.chip_price": self.price,
            "cost.chip_power_W": self.power_W,
            "execution.style": self.style,
            "execution.num_config": self.num_config,
        }


@dataclass(frozen=True, slots=True)
class MemoryPreset:
    """The off-chip memory of every chip: bandwidth, capacity, price and energy per byte."""

    name: str
    dram_bw_GBps: float
    dram_bytes: float
    price_per_GBps: float
    power_J_per_GB: float
    source: str

    def edits(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "system.memory.dram_bw_GBps": self.dram_bw_GBps,
            "system.memory.dram_bytes": self.dram_bytes,
            "cost.dram_price_per_GBps": self.price_per_GBps,
            "cost.dram_power_J_per_GB": self.power_J_per_GB,
        }


@dataclass(frozen=True, slots=True)
class LinkPreset:
    """The chip-to-chip links: the first network dimension's and every other one's."""

    name: str
    first_bw_GBps: float
    first_power_J_per_GB: float
    other_bw_GBps: float
    other_power_J_per_GB: float
    source: str

    def edits(self, data: Mapping[str, Any]) -> dict[str, Any]:
        n = len(data["system"]["network"])
        out: dict[str, Any] = {}
        for i in range(n):
            out[f"system.network[{i}].link_bw_GBps"] = self.first_bw_GBps if i == 0 else self.other_bw_GBps
        powers = [self.first_power_J_per_GB] + [self.other_power_J_per_GB] * (n - 1)
        out["cost.link_power_J_per_GB"] = powers
        return out


@dataclass(frozen=True, slots=True)
class TopologyPreset:
    """A network: one entry per dimension (``topology``, ``size``, ``parallelism``).

    Link bandwidths and link energies are kept from the base spec (dimension i takes the
    base's dimension min(i, last)); an ``interconnect`` axis sets them afterwards.
    """

    name: str
    variant: str  #: DFModel's name of the network
    dims: tuple[dict[str, Any], ...]
    source: str

    def edits(self, data: Mapping[str, Any], sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
        """The network of this preset on spec data ``data``; ``sizes`` replaces the
        dimensions' sizes (a study's ``[networks]`` table). Parallelism roles are set only
        for an LLM workload (the other kinds run on a fixed network without roles)."""
        base = data["system"]["network"]
        powers = list(data.get("cost", {}).get("link_power_J_per_GB", []))
        roles = data.get("workload", {}).get("kind", "llm") in LLM_KINDS
        network, new_powers = [], []
        for i, dim in enumerate(self.dims):
            j = min(i, len(base) - 1)
            entry = dict(dim, link_bw_GBps=base[j]["link_bw_GBps"])
            if sizes is not None:
                entry["size"] = sizes[i]
            if not roles:
                del entry["parallelism"]
            network.append(entry)
            if powers:
                new_powers.append(powers[min(i, len(powers) - 1)])
        out: dict[str, Any] = {"system.network": network}
        if powers:
            out["cost.link_power_J_per_GB"] = new_powers
        return out


@dataclass(frozen=True, slots=True)
class StylePreset:
    """An execution style with the configuration count it needs: dataflow lets the search
    choose how many configurations (``"auto"``), kernel by kernel has one per kernel (0).
    Applied after ``accelerator``, whose chip carries its own style."""

    name: str
    num_config: int | str
    source: str

    def edits(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {"execution.style": self.name, "execution.num_config": self.num_config}


def _dim(topology: str, size: int, parallelism: str) -> dict[str, Any]:
    return {"topology": topology, "size": size, "parallelism": parallelism}


ACCELERATORS: dict[str, Chip] = {
    c.name: c
    for c in (
        Chip("h100", 1056, 16, 16, 118489090.0, 1.837, 33000.0, 750.0, "kernel_by_kernel", 0,
             _src("h100/2d_torus_hbm_nvlink")),
        Chip("tpu_v4", 8, 128, 128, 167772160.0, 1.05, 4474.816901, 170.6308815,
             "kernel_by_kernel", 0, _src("tpu/2d_torus_hbm_nvlink")),
        Chip("sn30", 1280, 32, 6, 671088640.0, 1.25, 16522.25023, 444.7061955, "dataflow", 6,
             _src("sn30/2d_torus_hbm_nvlink")),
        Chip("wse2", 853776, 4, 1, 41964010000.0, 1.1, 3025964.118, 20298.12258, "dataflow", 1,
             _src("wse-2/2d_torus_hbm_nvlink")),
    )
}  # fmt: skip

MEMORIES: dict[str, MemoryPreset] = {
    m.name: m
    for m in (
        MemoryPreset("ddr", 300.0, 1099511600000.0, 1.0, 0.16248, _src("h100/2d_torus_ddr_pcie")),
        MemoryPreset("hbm", 3072.0, 103079215104.0, 1.0, 0.05624, _src("h100/2d_torus_hbm_nvlink")),
    )
}

INTERCONNECTS: dict[str, LinkPreset] = {
    p.name: p
    for p in (
        LinkPreset("pcie", 50.0, 0.052, 50.0, 0.052, _src("h100/2d_torus_hbm_pcie")),
        LinkPreset("nvlink", 450.0, 0.0104, 50.0, 0.052, _src("h100/2d_torus_hbm_nvlink")),
        LinkPreset("nvlink_all", 450.0, 0.0104, 450.0, 0.0104,
                   "DLRM/DSE/system/h100/2d_torus_hbm_nvlink/user_input/setup.txt"),
    )
}

TOPOLOGIES: dict[str, TopologyPreset] = {
    t.name: t
    for t in (
        TopologyPreset("torus2d", "r_r", (_dim("ring", 8, "tp"), _dim("ring", 128, "pp")),
                       _src("h100/2d_torus_hbm_nvlink")),
        TopologyPreset("torus3d", "r_r_r",
                       (_dim("ring", 8, "tp"), _dim("ring", 64, "pp"), _dim("ring", 2, "dp")),
                       _src("h100/3d_torus_hbm_nvlink")),
        TopologyPreset("dragonfly", "fc_fc", (_dim("fc", 8, "tp"), _dim("fc", 128, "pp")),
                       _src("h100/dragonfly_hbm_nvlink")),
        TopologyPreset("dgx1", "r_sw", (_dim("ring", 8, "tp"), _dim("switch", 128, "pp")),
                       _src("h100/dgx_1_hbm_nvlink")),
        TopologyPreset("dgx2", "sw_sw", (_dim("switch", 8, "tp"), _dim("switch", 128, "pp")),
                       _src("h100/dgx_2_hbm_nvlink")),
    )
}  # fmt: skip

STYLES: dict[str, StylePreset] = {
    p.name: p
    for p in (
        StylePreset("dataflow", "auto", "docs/spec.md, execution.num_config"),
        StylePreset("kernel_by_kernel", 0, "docs/spec.md, execution.num_config"),
    )
}

#: preset axis name -> its presets
PRESETS: dict[str, Mapping[str, Any]] = {
    "accelerator": ACCELERATORS,
    "memory": MEMORIES,
    "topology": TOPOLOGIES,
    "interconnect": INTERCONNECTS,
    "style": STYLES,
}

#: the order presets are applied in (the interconnect needs the topology's dimension count;
#: a style overrides the accelerator's)
ORDER = ("accelerator", "memory", "topology", "interconnect", "style")


def area_split_edits(share: float, units: int, memory_unit_bytes: float) -> dict[str, Any]:
    """A chip of ``units`` units, a share ``share`` of them compute units (cores) and the
    rest memory units of ``memory_unit_bytes`` each (a study's ``compute_share`` axis with
    its ``[area]`` table): cores = round(units x share), SRAM = (units - cores) x bytes.

    >>> area_split_edits(0.2, 2080, 524288)
    {'system.accelerator.cores': 416, 'system.accelerator.sram_bytes': 872415232.0}
    """
    cores = int(round(units * share))
    return {"system.accelerator.cores": cores, "system.accelerator.sram_bytes": float((units - cores) * memory_unit_bytes)}


def preset_edits(
    axis: str, name: str, data: Mapping[str, Any], sizes: Mapping[str, tuple[int, ...]] | None = None
) -> dict[str, Any]:
    """The field edits (path -> value) of preset ``name`` of ``axis`` on spec data ``data``;
    ``sizes``: network sizes per topology preset name (a study's ``[networks]`` table).

    >>> e = preset_edits("interconnect", "nvlink", {"system": {"network": [{}, {}]}})
    >>> e["system.network[0].link_bw_GBps"], e["cost.link_power_J_per_GB"]
    (450.0, [0.0104, 0.052])
    """
    if axis == "topology":
        return TOPOLOGIES[name].edits(data, (sizes or {}).get(name))
    return PRESETS[axis][name].edits(data)
