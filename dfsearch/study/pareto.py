"""The exact Pareto front of a results table over two or three of throughput (maximised),
cost and power (minimised).

A row is on the front when no other feasible row is at least as good in every objective and
strictly better in one. Rows without a feasible mapping are never on it. Rows equal in every
objective are all kept (neither dominates the other).

>>> rows = [{"point": 0, "final_s": 1.0, "system_cost": 10.0, "system_power": 1.0},
...         {"point": 1, "final_s": 2.0, "system_cost": 5.0, "system_power": 1.0},
...         {"point": 2, "final_s": 2.0, "system_cost": 12.0, "system_power": 1.0},
...         {"point": 3, "final_s": None, "system_cost": None, "system_power": None}]
>>> [r["point"] for r in pareto_front(rows, ("throughput", "cost"))]
[0, 1]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dfsearch.errors import Issue, SpecError

__all__ = ["OBJECTIVES", "parse_objectives", "objective_values", "pareto_front"]

#: objective -> (table column, sign: +1 minimised, -1 maximised)
OBJECTIVES = {
    "throughput": ("final_s", 1.0),  # max 1/final_s == min final_s
    "cost": ("system_cost", 1.0),
    "power": ("system_power", 1.0),
}


def parse_objectives(text: str, option: str = "--pareto") -> tuple[str, ...]:
    """``"throughput,cost"`` -> ``("throughput", "cost")``; 2 or 3 distinct known names.

    >>> parse_objectives("cost, throughput")
    ('cost', 'throughput')
    """
    names = tuple(n.strip() for n in str(text).split(",") if n.strip())
    bad = [n for n in names if n not in OBJECTIVES]
    if bad or not 2 <= len(names) <= 3 or len(set(names)) != len(names):
        msg = (f"must name 2 or 3 distinct objectives among {', '.join(OBJECTIVES)}, separated "
               f"by commas. Got {text!r} instead.")  # fmt: skip
        raise SpecError(Issue(option, msg))
    return names


def objective_values(row: Mapping[str, Any], objectives: Sequence[str]) -> tuple[float, ...] | None:
    """The row's values to minimise (final_s for throughput), None if infeasible."""
    out = []
    for name in objectives:
        column, sign = OBJECTIVES[name]
        value = row.get(column)
        if value is None:
            return None
        out.append(sign * float(value))
    return tuple(out)


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_front(rows: Sequence[Mapping[str, Any]], objectives: Sequence[str]) -> list[Mapping[str, Any]]:
    """The non-dominated feasible rows, in table order.

    Rows with equal objective vectors stand or fall together, so the front is computed on the
    distinct vectors, sorted: in lexicographic order a vector can only be dominated by one
    before it. With 2 objectives that is one whose second value is <= its own (a running
    minimum, O(n log n)); with 3 each vector is compared with the front found so far
    (O(n x front)). Exact in both cases.
    """
    groups: dict[tuple[float, ...], list[int]] = {}
    for i, r in enumerate(rows):
        if (v := objective_values(r, objectives)) is not None:
            groups.setdefault(v, []).append(i)
    front: list[tuple[float, ...]] = []
    if len(objectives) == 2:
        best = math.inf
        for v in sorted(groups):
            if v[1] < best:  # no earlier (smaller or equal first value) vector has second <= v's
                front.append(v)
                best = v[1]
    else:
        for v in sorted(groups):
            if not any(_dominates(f, v) for f in front):
                front.append(v)
    return [rows[i] for i in sorted(i for v in front for i in groups[v])]
