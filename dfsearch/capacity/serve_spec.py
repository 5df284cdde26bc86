"""The ``[serve]`` table of a ``dfsearch serve`` spec (docs/serving.md, "Capacity search").

A serve spec is an ``llm_serving`` spec (its ``[workload]``, ``[graph]``, ``[system]``, ...:
the model and one chip) plus a ``[serve]`` table: the traffic, the SLOs, the price and the
space of deployments searched. :func:`read_serve_spec` splits the file, checks every
``[serve]`` key (a bad one: :class:`SpecError` naming the file, the field path, the value
and what was expected; exit code 2) and returns the base spec's data with the table.

>>> s = serve_table({"rate_per_s": 20, "ttft_p99_s": 1, "tpot_p99_s": 0.05,
...                  "dollars_per_chip_hour": 3, "prompt": {"dist": "fixed", "tokens": 512},
...                  "output": {"dist": "fixed", "tokens": 64}}, "s.toml", 50.0)
>>> s.tp, s.modes[0].label, s.traffic.prompt
((1, 2, 4, 8), 'colocated', Fixed(n=512))
>>> serve_table({"rate_per_s": 0}, "s.toml", 50.0)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dfsearch.errors.SpecError: s.toml: serve.rate_per_s must be a number > 0. Got 0 instead.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsearch.capacity._checks import is_int, is_real
from dfsearch.capacity.traffic import Fixed, LogNormal, Poisson, Traffic, Uniform
from dfsearch.codes import ServeMode
from dfsearch.errors import Issue, SpecError
from dfsearch.presets import CHIPS, chip_named

__all__ = ["ServeSpec", "ChipOption", "read_serve_spec", "split_serve", "serve_table", "WARMUP_FRACTION", "SAMPLERS",
           "EXHAUSTIVE_LIMIT"]

#: the first tenth of the requests warm the replicas up and is not measured
WARMUP_FRACTION = 0.1
#: the default ``exhaustive_limit``: the most deployments (``search.space_size``) that
#: ``sampler = "auto"`` searches exhaustively
EXHAUSTIVE_LIMIT = 1_000_000


@dataclass(frozen=True, slots=True)
class ChipOption:
    """One chip the search may use: the spec's own (``name`` "") or a ``[serve.chips.<name>]``
    table, whose ``accelerator`` and ``memory`` keys replace those of the spec's
    ``[system.accelerator]`` and ``[system.memory]``; with ``preset`` (a chip preset's name,
    docs/presets.md) the chip is that preset's, its own ``accelerator`` and ``memory`` keys
    still winning, and the spec's accelerator and memory keys are not used."""

    name: str
    dollars_per_chip_hour: float
    accelerator: dict
    memory: dict
    preset: str = ""


@dataclass(frozen=True, slots=True)
class ServeSpec:
    """The checked ``[serve]`` table (docs/serving.md lists every key and its default)."""

    traffic: Traffic
    requests: int
    seed: int
    ttft_p99_s: float
    tpot_p99_s: float
    chips: tuple[ChipOption, ...]
    tp: tuple[int, ...]
    pp: tuple[int, ...]
    max_chips: int
    batch_caps: tuple[int, ...]
    chunk_tokens: tuple[int, ...]
    modes: tuple[ServeMode, ...]
    scale_out_bw_GBps: float
    scale_out_latency_s: float
    memory_fraction: float
    block_tokens: int
    max_simulations: int = 2000
    #: one of SAMPLERS: "tpe" and "nsga2" sample ``trials`` deployments; "auto": exhaustive
    #: while the space holds at most ``exhaustive_limit`` deployments, else "tpe"
    sampler: str = "auto"
    trials: int = 0
    exhaustive_limit: int = EXHAUSTIVE_LIMIT

    @property
    def rate_per_s(self) -> float:
        return self.traffic.arrivals.rate_per_s


_KEYS = ("rate_per_s", "requests", "seed", "prompt", "output", "ttft_p99_s", "tpot_p99_s",
         "dollars_per_chip_hour", "chips", "tp", "pp", "max_chips", "batch_caps", "chunk_tokens", "modes",
         "scale_out_bw_GBps", "scale_out_latency_s", "memory_fraction", "block_tokens",
         "max_simulations", "sampler", "trials", "exhaustive_limit")

#: the searches of the deployment space: exhaustive with bounds, or Optuna's TPE or NSGA-II;
#: "auto" picks exhaustive up to ``exhaustive_limit`` deployments, TPE above
SAMPLERS = ("auto", "exhaustive", "tpe", "nsga2")


def read_serve_spec(path: Path) -> tuple[dict[str, Any], ServeSpec]:
    """The base spec's data (every table but ``[serve]``) and the checked ``[serve]`` table."""
    file = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise SpecError(f"cannot read the file: {e.strerror or e}.", file=file) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"is not valid TOML: {e}.", file=file) from None
    return split_serve(data, file)


def split_serve(data: dict[str, Any], file: str) -> tuple[dict[str, Any], ServeSpec]:
    """A serve spec's parsed TOML ``data`` as :func:`read_serve_spec` returns it: the other
    tables (a shallow copy) and the checked ``[serve]`` table (``file`` names it in errors)."""
    if not isinstance(data.get("serve"), dict):
        raise SpecError(Issue("serve", "is required (a [serve] table: docs/serving.md, \"Capacity search\")."),
                        file=file)
    data = dict(data)
    table = data.pop("serve")
    nets = data.get("system", {}).get("network") or [{}]
    default_bw = nets[-1].get("link_bw_GBps", 0.0) if isinstance(nets[-1], dict) else 0.0
    return data, serve_table(table, file, default_bw)


def serve_table(t: dict[str, Any], file: str, default_bw_GBps: float) -> ServeSpec:
    """Check a ``[serve]`` table (module docstring); the first bad key raises."""
    def bad(key: str, expected: str, value: object) -> SpecError:
        return SpecError(Issue(f"serve.{key}", f"must be {expected}. Got {value!r} instead."), file=file)

    for key in t:
        if key not in _KEYS:
            raise SpecError(Issue(f"serve.{key}", f"is not a [serve] key; the keys are {', '.join(_KEYS)}."),
                            file=file)

    def real(key: str, default: float | None = None, *, lo: float = 0.0, strict: bool = True,
             hi: float | None = None) -> float:
        v = t.get(key, default)
        if v is None:
            raise SpecError(Issue(f"serve.{key}", "is required."), file=file)
        ok = is_real(v) and (v > lo if strict else v >= lo) and (hi is None or v <= hi)
        if not ok:
            rng = f"{'>' if strict else '>='} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
            raise bad(key, f"a number {rng}", v)
        return float(v)

    def integer(key: str, default: int, lo: int) -> int:
        v = t.get(key, default)
        if not (is_int(v) and v >= lo):
            raise bad(key, f"an integer >= {lo}", v)
        return int(v)

    def ints(key: str, default: list[int], lo: int) -> tuple[int, ...]:
        v = t.get(key, default)
        if not (isinstance(v, list) and v):
            raise bad(key, f"a non-empty list of integers >= {lo}", v)
        for i, x in enumerate(v):
            if not (is_int(x) and x >= lo):
                raise bad(f"{key}[{i}]", f"an integer >= {lo}", x)
        return tuple(sorted(set(v)))

    rate = real("rate_per_s")
    traffic = Traffic(Poisson(rate), _length(t, "prompt", bad, file), _length(t, "output", bad, file))
    modes = t.get("modes", [m.label for m in ServeMode])
    if not (isinstance(modes, list) and modes):
        raise bad("modes", f"a non-empty list of {ServeMode.labels()}", modes)
    for i, m in enumerate(modes):
        if m not in ServeMode.labels():
            raise bad(f"modes[{i}]", f"one of {ServeMode.labels()}", m)
    return ServeSpec(
        traffic=traffic, requests=integer("requests", 2000, 20), seed=integer("seed", 0, 0),
        ttft_p99_s=real("ttft_p99_s"), tpot_p99_s=real("tpot_p99_s"),
        chips=_chips(t, real, file),
        tp=ints("tp", [1, 2, 4, 8], 1), pp=ints("pp", [1], 1), max_chips=integer("max_chips", 64, 1),
        batch_caps=ints("batch_caps", [32, 64, 128, 256], 1), chunk_tokens=ints("chunk_tokens", [512, 2048], 8),
        modes=tuple(sorted({ServeMode.from_label(m) for m in modes})),
        scale_out_bw_GBps=real("scale_out_bw_GBps", default_bw_GBps or None),
        scale_out_latency_s=real("scale_out_latency_s", 0.0, strict=False),
        memory_fraction=real("memory_fraction", 0.9, hi=1.0), block_tokens=integer("block_tokens", 16, 1),
        max_simulations=integer("max_simulations", 2000, 1),
        sampler=_sampler(t, bad), trials=integer("trials", 200, 1),
        exhaustive_limit=integer("exhaustive_limit", EXHAUSTIVE_LIMIT, 1),
    )


def _sampler(t: dict[str, Any], bad) -> str:
    v = t.get("sampler", "auto")
    if v not in SAMPLERS:
        raise bad("sampler", f"one of {SAMPLERS}", v)
    return v


def _chips(t: dict[str, Any], real, file: str) -> tuple[ChipOption, ...]:
    """The spec's chip at ``dollars_per_chip_hour``, or the ``[serve.chips.<name>]`` tables."""
    table = t.get("chips")
    if table is None:
        return (ChipOption("", real("dollars_per_chip_hour"), {}, {}),)
    if not (isinstance(table, dict) and table) or "dollars_per_chip_hour" in t:
        raise SpecError(Issue("serve.chips", "must be tables [serve.chips.<name>], each with its own "
                              "dollars_per_chip_hour (then no serve.dollars_per_chip_hour)."), file=file)
    out = []
    for name, chip in table.items():
        where = f"serve.chips.{name}"
        if not isinstance(chip, dict):
            raise SpecError(Issue(where, f"must be a table. Got {chip!r} instead."), file=file)
        for k, v in chip.items():
            if k not in _CHIP_KEYS:
                raise SpecError(Issue(f"{where}.{k}", "is not a key of a chip; the keys are "
                                      f"{', '.join(_CHIP_KEYS)}."), file=file)
            if k in ("accelerator", "memory") and not isinstance(v, dict):
                raise SpecError(Issue(f"{where}.{k}", f"must be a table. Got {v!r} instead."), file=file)
        price = chip.get("dollars_per_chip_hour")
        if not (is_real(price) and price > 0):
            raise SpecError(Issue(f"{where}.dollars_per_chip_hour", f"must be a number > 0. Got {price!r} "
                                  "instead."), file=file)
        out.append(ChipOption(name, float(price), dict(chip.get("accelerator", {})), dict(chip.get("memory", {})),
                              _preset(chip.get("preset", ""), f"{where}.preset", file)))
    return tuple(out)


_CHIP_KEYS = ("preset", "dollars_per_chip_hour", "accelerator", "memory")


def _preset(name: object, where: str, file: str) -> str:
    """A chip option's ``preset``: "" (none) or the name (or alias) of a chip preset."""
    if name == "" or (isinstance(name, str) and chip_named(name) is not None):
        return name
    raise SpecError(Issue(where, f"must name a chip preset: one of {', '.join(repr(n) for n in CHIPS)} (or an "
                          f"alias, docs/presets.md). Got {name!r} instead."), file=file)


def _length(t: dict[str, Any], key: str, bad, file: str):
    """A length distribution table: ``{dist = "fixed", tokens}``, ``{dist = "uniform", lo, hi}``
    or ``{dist = "lognormal", median, sigma, lo, hi}``."""
    v = t.get(key)
    shapes = {"fixed": ("tokens",), "uniform": ("lo", "hi"), "lognormal": ("median", "sigma", "lo", "hi")}
    if not isinstance(v, dict) or v.get("dist") not in shapes:
        raise bad(key, 'a table with dist = "fixed", "uniform" or "lognormal" (docs/serving.md)', v)
    need = shapes[v["dist"]]
    for k in v:
        if k != "dist" and k not in need:
            raise SpecError(Issue(f"serve.{key}.{k}", f"is not a key of dist = {v['dist']!r}; its keys are "
                                  f"{', '.join(need)}."), file=file)
    for k in need:
        if k not in v:
            raise SpecError(Issue(f"serve.{key}.{k}", "is required."), file=file)
    args = [v[k] for k in need]
    try:
        return {"fixed": Fixed, "uniform": Uniform, "lognormal": LogNormal}[v["dist"]](*args)
    except SpecError as e:  # traffic.length.<field> -> serve.<key>.<field>
        issue = e.issues[0]
        raise SpecError(Issue(f"serve.{key}.{issue.path.rsplit('.', 1)[-1]}", issue.message), file=file) from None
