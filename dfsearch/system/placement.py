"""Parallelism placement: which of TP, PP and DP each network dimension carries.

A ``Placement`` lists, for every network dimension, its *parts*, inner first; a part is a kind
of parallelism and its degree (docs/model.md, "Parallelism placement"):

* one part: the kind spans the whole dimension (DFModel's only rule);
* two parts of degrees a (inner) x b (outer) = the dimension's size: the dimension is split.
  The inner kind's groups are a *contiguous* chips (0..a-1, a..2a-1, ...), the outer kind's
  groups are b *strided* chips a apart (j, j+a, j+2a, ...);
* no part: a dimension of size 1 carries nothing.

Every kind lives on at most one dimension (or one part of one); a kind found nowhere has
degree 1. The spec fixes a dimension's kind with ``parallelism = "tp" | "pp" | "dp"`` (always
the whole dimension) or leaves it to the search (omitted, ``"none"`` or ``"auto"``);
``placements`` enumerates what the search may choose. Plain Python, no numpy.

>>> from dfsearch.codes import Parallelism as P
>>> pl = Placement(((Part(P.TP, 4),), (Part(P.PP, 4), Part(P.DP, 2))))
>>> str(pl), pl.degree(P.DP), pl.stride(P.DP), pl.stride(P.PP)
('dim 0: tp 4; dim 1: pp 4 x dp 2', 2, 4, 1)
>>> parse_dim("pp 4 x dp", 8)
(Part(kind=<Parallelism.PP: 2>, degree=4), Part(kind=<Parallelism.DP: 3>, degree=2))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsearch.codes import Parallelism

if TYPE_CHECKING:
    from dfsearch.spec import System

__all__ = [
    "KINDS_OF_PARALLELISM",
    "MAX_PARTS",
    "Part",
    "Placement",
    "searched",
    "has_searched_dims",
    "fixed_placement",
    "placement_texts",
    "placements",
    "parse_dim",
]

#: the kinds a placement distributes, in DFModel's dimension order
KINDS_OF_PARALLELISM = (Parallelism.TP, Parallelism.PP, Parallelism.DP)
#: kinds one dimension may carry at once
MAX_PARTS = 2


@dataclass(frozen=True, slots=True)
class Part:
    """One kind of parallelism on (a part of) one dimension, with its degree."""

    kind: Parallelism
    degree: int

    def text(self) -> str:
        return f"{self.kind.label} {self.degree}"


@dataclass(frozen=True, slots=True)
class Placement:
    """The parts of every network dimension, inner (contiguous) part first."""

    dims: tuple[tuple[Part, ...], ...]

    def find(self, kind: Parallelism) -> tuple[int, int]:
        """(dimension, part index) carrying ``kind``; (-1, -1) when none does."""
        for i, parts in enumerate(self.dims):
            for j, part in enumerate(parts):
                if part.kind is kind:
                    return i, j
        return -1, -1

    def degree(self, kind: Parallelism) -> int:
        """The group size of ``kind`` (1 when no dimension carries it)."""
        i, j = self.find(kind)
        return self.dims[i][j].degree if i >= 0 else 1

    def stride(self, kind: Parallelism) -> int:
        """Distance between consecutive members of a ``kind`` group along its dimension:
        the product of the inner parts' degrees (1 = contiguous)."""
        i, j = self.find(kind)
        return math.prod(p.degree for p in self.dims[i][:j]) if i >= 0 else 1

    def dim_text(self, i: int) -> str:
        """``"pp 4 x dp 2"``, ``"tp 8"`` or ``"none"``: dimension i's parts, inner first."""
        return " x ".join(p.text() for p in self.dims[i]) or "none"

    def texts(self) -> tuple[str, ...]:
        """Every dimension's text (the mapping file's and JSON's ``placement``)."""
        return tuple(self.dim_text(i) for i in range(len(self.dims)))

    def __str__(self) -> str:
        return "; ".join(f"dim {i}: {t}" for i, t in enumerate(self.texts()))


def searched(par: Parallelism) -> bool:
    """True when a dimension's parallelism is left to the search (omitted, none or auto)."""
    return par is Parallelism.NONE or par is Parallelism.AUTO


def has_searched_dims(system: System) -> bool:
    """True when some network dimension leaves its parallelism to the search."""
    return any(searched(d.parallelism) for d in system.network)


def fixed_placement(system: System, shape: tuple[int, ...]) -> Placement:
    """The spec's own roles on ``shape``: a fixed kind spans its dimension (even at size 1,
    as DFModel counts it); a searched dimension carries nothing."""
    return Placement(tuple(
        () if searched(d.parallelism) else (Part(d.parallelism, s),)
        for d, s in zip(system.network, shape)
    ))  # fmt: skip


def placement_texts(
    system: System, shape: tuple[int, ...], placement: Placement | None
) -> list[str] | None:
    """Each dimension's text for output (JSON ``placement``): the chosen placement, else the
    spec's fixed roles; None when the network has no roles (DLRM, HPL, FFT)."""
    if placement is not None:
        return list(placement.texts())
    if has_searched_dims(system):
        return None
    return list(fixed_placement(system, shape).texts())


def _dim_options(size: int, free: tuple[Parallelism, ...]) -> list[tuple[Part, ...]]:
    """What a searched dimension of ``size`` chips may carry from the ``free`` kinds: nothing
    at size 1; else one kind on the whole of it, or two kinds split a (inner) x b (outer)
    with a, b > 1."""
    if size == 1:
        return [()]
    out: list[tuple[Part, ...]] = [(Part(k, size),) for k in free]
    small = [a for a in range(2, math.isqrt(size) + 1) if size % a == 0]
    splits = sorted({*small, *(size // a for a in small)})
    for inner in free:
        for outer in free:
            if outer is not inner:
                out += [(Part(inner, a), Part(outer, size // a)) for a in splits]
    return out


def placements(system: System, shape: tuple[int, ...]) -> list[Placement]:
    """Every placement on ``shape`` that keeps the spec's fixed roles: each searched
    dimension carries what ``_dim_options`` allows of the kinds no other dimension carries.
    Ordered by dimension, each dimension's options in ``_dim_options`` order; not deduplicated
    (``search.outer.placements`` drops those with the same groups and links)."""
    fixed = fixed_placement(system, shape)
    used = {p.kind for parts in fixed.dims for p in parts}
    out: list[Placement] = []

    def rec(i: int, dims: tuple[tuple[Part, ...], ...], taken: frozenset) -> None:
        if i == len(shape):
            out.append(Placement(dims))
            return
        if not searched(system.network[i].parallelism):
            rec(i + 1, dims + (fixed.dims[i],), taken)
            return
        free = tuple(k for k in KINDS_OF_PARALLELISM if k not in taken)
        for parts in _dim_options(shape[i], free):
            rec(i + 1, dims + (parts,), taken | {p.kind for p in parts})

    rec(0, (), frozenset(used))
    return out


def parse_dim(text: object, size: int) -> tuple[Part, ...]:
    """A dimension's parts from its text: ``"tp"`` / ``"tp 8"`` (whole), ``"pp 4 x dp 2"``
    (inner first; one degree may be left out and is then size / the other), ``"none"`` (size 1
    only). ``ValueError`` says what is wrong (the message ends "Got ... instead.")."""
    if not isinstance(text, str):
        raise ValueError(
            f"must be a string such as 'tp 4' or 'pp 4 x dp 2'. Got {text!r} instead."
        )
    words = [w.strip() for w in text.lower().split(" x ")]
    if words == ["none"]:
        if size != 1:
            raise ValueError(f"can be 'none' only on a dimension of size 1; this one has {size} "
                             f"chips. Got {text!r} instead.")  # fmt: skip
        return ()
    if len(words) > MAX_PARTS:
        raise ValueError(f"may carry at most {MAX_PARTS} kinds. Got {text!r} instead.")
    kinds, degrees = [], []
    for w in words:
        bits = w.split()
        labels = [k.label for k in KINDS_OF_PARALLELISM]
        if (
            not bits
            or bits[0] not in labels
            or len(bits) > 2
            or (len(bits) == 2 and not bits[1].isdigit())
        ):
            raise ValueError(f"each part must be a kind ({', '.join(labels)}) with an optional "
                             f"degree, parts joined by ' x '. Got {text!r} instead.")  # fmt: skip
        kinds.append(Parallelism.from_label(bits[0]))
        degrees.append(int(bits[1]) if len(bits) == 2 else 0)
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"must not repeat a kind. Got {text!r} instead.")
    missing = [j for j, d in enumerate(degrees) if d == 0]
    known = math.prod(d for d in degrees if d)
    if len(missing) == 1 and known and size % known == 0:
        degrees[missing[0]] = size // known
    if 0 in degrees or math.prod(degrees) != size:
        raise ValueError(f"degrees must multiply to the dimension's size {size}. Got {text!r} "
                         "instead.")  # fmt: skip
    return tuple(Part(k, d) for k, d in zip(kinds, degrees))  # type: ignore[arg-type]
