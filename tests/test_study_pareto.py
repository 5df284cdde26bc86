"""The exact Pareto front (dfsearch/study/pareto.py) against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from dfsearch.errors import SpecError
from dfsearch.study.pareto import pareto_front, parse_objectives

COLUMNS = {"throughput": ("final_s", -1), "cost": ("system_cost", 1), "power": ("system_power", 1)}


def brute_force(rows, objectives):
    """Row r is on the front iff no row s has s >= r in every objective (throughput 1/final_s
    maximised, cost and power minimised) and s > r in one."""

    def goodness(row):  # larger is better, throughput as 1/final_s
        return [1.0 / row["final_s"] if o == "throughput" else -row[COLUMNS[o][0]] for o in objectives]

    feasible = [r for r in rows if r["final_s"] is not None]
    front = []
    for r in feasible:
        gr = goodness(r)
        dominated = any(
            all(a >= b for a, b in zip(goodness(s), gr)) and any(a > b for a, b in zip(goodness(s), gr))
            for s in feasible
        )
        if not dominated:
            front.append(r["point"])
    return front


def random_rows(rng, n, levels):
    rows = []
    for i in range(n):
        if rng.random() < 0.1:
            rows.append({"point": i, "final_s": None, "system_cost": None, "system_power": None})
        else:
            rows.append({"point": i, "final_s": float(rng.choice(levels)), "system_cost": float(rng.choice(levels)),
                         "system_power": float(rng.choice(levels))})
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_front_equals_brute_force(seed):
    rng = random.Random(seed)
    levels = [1, 2, 3, 4] if seed % 2 else [rng.uniform(1, 100) for _ in range(50)]  # ties and none
    rows = random_rows(rng, rng.randint(0, 60), levels)
    for k in (2, 3):
        for objectives in itertools.permutations(COLUMNS, k):
            assert [r["point"] for r in pareto_front(rows, objectives)] == brute_force(rows, objectives)


def test_equal_points_are_both_kept_and_infeasible_never():
    rows = [{"point": 0, "final_s": 2.0, "system_cost": 1.0, "system_power": 1.0},
            {"point": 1, "final_s": 2.0, "system_cost": 1.0, "system_power": 1.0},
            {"point": 2, "final_s": None, "system_cost": None, "system_power": None}]
    assert [r["point"] for r in pareto_front(rows, ("throughput", "cost"))] == [0, 1]


def test_objective_names_checked():
    assert parse_objectives("throughput,cost,power") == ("throughput", "cost", "power")
    for bad in ("throughput", "throughput,throughput", "speed,cost", "a,b,c,d"):
        with pytest.raises(SpecError, match="--pareto must name 2 or 3 distinct objectives"):
            parse_objectives(bad)
