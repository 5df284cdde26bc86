"""The outer strategy "optuna": a fixed number of outer choices sampled by Optuna's TPE.

The seeded TPE sampler picks a (shape, tile count, micro-batch size) index (when the spec
leaves parallelism to the search, first the placement as a categorical, then an index among
that placement's pairs) and a configuration-count index for up to ``space.trials`` distinct outer choices (a repeated pick
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
        groups = _by_placement(pairs)
        seen: set[tuple[int, int]] = set()
        trials = min(space.trials, space.total)
        for _ in range(20 * trials):
            if len(seen) >= trials or state.out_of_budget():
                break
            trial = study.ask()
            key = (_suggest_pair(trial, groups, len(pairs)),
                   trial.suggest_int("configs", 0, len(counts) - 1))  # fmt: skip
            if key in seen:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            seen.add(key)
            shape, t, mbs, pl = pairs[key[0]]
            p = state.unbounded_pair(shape, t, counts[key[1]], mbs, pl)
            if p.status is not Status.OK:
                state.note_outer_violation(p)
                value = math.inf
            else:
                value = state.solve(p, counts[key[1]])
            state.solved += 1
            study.tell(trial, value if math.isfinite(value) else 1e300)
            if progress:
                progress(state.progress_record(len(seen), space.total, 0.0))  # no bound
        state.open_bound = 0.0  # the outer choices are not bounded: never a proof
        return self.name


def _by_placement(pairs: tuple) -> dict[str, list[int]]:
    """Indices of the pairs of each placement (its text; "" = the spec's fixed roles), in
    the order they first appear."""
    out: dict[str, list[int]] = {}
    for i, (*_, pl) in enumerate(pairs):
        out.setdefault("" if pl is None else str(pl), []).append(i)
    return out


def _suggest_pair(trial: object, groups: dict[str, list[int]], n: int) -> int:
    """A pair index: with one placement the index itself ("pair", as before placements
    were searched); else the placement as a categorical, then an index among its pairs
    (one parameter per placement, since their pair counts differ)."""
    if len(groups) == 1:
        return trial.suggest_int("pair", 0, n - 1)  # type: ignore[attr-defined]
    names = list(groups)
    label = trial.suggest_categorical("placement", names)  # type: ignore[attr-defined]
    members = groups[label]
    name = f"pair[{names.index(label)}]"
    return members[trial.suggest_int(name, 0, len(members) - 1)]  # type: ignore[attr-defined]
