"""The outer strategy "optuna": a fixed number of outer choices sampled by Optuna's TPE.

The seeded TPE sampler picks a (shape, tile count, micro-batch size) index and a
configuration-count index for up to ``space.trials`` distinct outer choices (a repeated pick
is told as pruned and asked again, at most 20 times the trial count); each is solved through
``state.solve``. The outer choices are not bounded, so a sampled run never claims a proof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dfsearch.codes import Status
from dfsearch.search.strategies.base import OuterSpace, OuterState, Progress

__all__ = ["OptunaTPE"]


@dataclass(frozen=True, slots=True)
class OptunaTPE:
    """Seeded TPE sampling of the outer choices (never proven)."""

    name: str = "optuna"
    summary: str = "a fixed number of outer choices sampled by Optuna's seeded TPE (never proven)"
    proves_optimality: bool = False

    def available(self) -> bool:
        return True  # optuna is a dependency of dfsearch

    def explore(self, state: OuterState, space: OuterSpace, progress: Progress | None) -> str:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=state.seed)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        pairs, counts = space.pairs, space.counts
        seen: set[tuple[int, int]] = set()
        trials = min(space.trials, space.total)
        for _ in range(20 * trials):
            if len(seen) >= trials or state.out_of_budget():
                break
            trial = study.ask()
            key = (trial.suggest_int("pair", 0, len(pairs) - 1),
                   trial.suggest_int("configs", 0, len(counts) - 1))  # fmt: skip
            if key in seen:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            seen.add(key)
            shape, t, mbs = pairs[key[0]]
            p = state.unbounded_pair(shape, t, counts[key[1]], mbs)
            if p.status is not Status.OK:
                state.note_outer_violation(p)
                value = math.inf
            else:
                value = state.solve(p, counts[key[1]])
            state.solved += 1
            study.tell(trial, value if math.isfinite(value) else 1e300)
            if progress:
                progress(len(seen), space.total, state.best.final_s if state.best else None)
        state.open_bound = 0.0  # the outer choices are not bounded: never a proof
        return self.name
