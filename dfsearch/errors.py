"""Exceptions that separate bad input (exit 2) from an infeasible problem (exit 1).

>>> err = SpecError([Issue("system.num_chip", "must be > 0. Got -1 instead.")], file="s.toml")
>>> print(err)
s.toml: system.num_chip must be > 0. Got -1 instead.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Issue", "DfsearchError", "SpecError", "InfeasibleError", "SolverUnavailableError"]


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem in an input: where it is (a field path) and what is wrong."""

    path: str
    message: str

    def render(self, file: str | None = None) -> str:
        where = f"{file}: " if file else ""
        sep = " " if self.path else ""
        return f"{where}{self.path}{sep}{self.message}"


class DfsearchError(Exception):
    """Base class of every error dfsearch raises on purpose."""

    exit_code = 1


class SpecError(DfsearchError, ValueError):
    """The input is malformed or inconsistent. Carries every problem found, not only the first."""

    exit_code = 2

    def __init__(self, issues: list[Issue] | Issue | str, *, file: str | None = None) -> None:
        if isinstance(issues, str):
            issues = [Issue("", issues)]
        elif isinstance(issues, Issue):
            issues = [issues]
        self.issues: tuple[Issue, ...] = tuple(issues)
        self.file = file
        super().__init__(str(self))

    def __str__(self) -> str:
        if len(self.issues) > 1:
            head = f"{self.file}: " if self.file else ""
            body = "\n".join("  " + i.render() for i in self.issues)
            return f"{head}{len(self.issues)} problems:\n{body}"
        return self.issues[0].render(self.file) if self.issues else "invalid input"

    def with_file(self, file: str) -> SpecError:
        return SpecError(list(self.issues), file=file)


class InfeasibleError(DfsearchError):
    """A valid spec for which no mapping satisfies the capacities (exit 1).

    ``result`` is the search's full result (a ``RunResult`` with its status, lower bound and
    per-constraint violations) when the error comes from a search.
    """

    exit_code = 1

    def __init__(self, message: str, *, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class SolverUnavailableError(DfsearchError, ImportError):
    """An optional backend is not installed; the message says how to install it (exit 2)."""

    exit_code = 2
