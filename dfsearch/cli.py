"""The ``dfsearch`` command line. Thin: parse arguments, call the API, map errors to exit codes.

Exit codes: 0 success, 1 no feasible mapping, 2 bad input (file, field path, value, expected).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from dfsearch import __version__
from dfsearch.codes import Equations, RunStatus
from dfsearch.codesign.command import codesign_command
from dfsearch.cost.partition import PartitionPlan
from dfsearch.errors import DfsearchError, InfeasibleError, SolverUnavailableError, SpecError
from dfsearch.explain import UNITS, violation_text
from dfsearch.io.toml_writer import graph_to_toml, spec_to_toml
from dfsearch.kernels.generators import GENERATORS
from dfsearch.kernels.generators import generate as gen
from dfsearch.loader import load_input, load_spec, replace_field
from dfsearch.report import (
    describe_graph,
    describe_spec,
    format_evaluation,
    format_run,
    partition_lines,
    stage_lines,
)
from dfsearch.result import SearchStats
from dfsearch.search.strategies import ASSIGNMENT_STRATEGIES, OUTER_STRATEGIES
from dfsearch.search.strategies.base import SearchProgress
from dfsearch.spec import Graph
from dfsearch.study import about, commands, html_report, plots
from dfsearch.study.pareto import pareto_front, parse_objectives
from dfsearch.study.study import load_study
from dfsearch.validate import RANGES, quote_list, seed_issue, strategy_issue

__all__ = ["app", "main"]

_EPILOG = (
    "Exit codes: 0 success, 1 no feasible mapping (the message says which constraint binds "
    "and by how much), 2 bad input. SPEC is a dfsearch TOML spec (docs/spec.md) or a "
    "DFModel setup.txt (detected by content)."
)

app = typer.Typer(
    name="dfsearch",
    help="Find the best dataflow mapping of a workload on a distributed accelerator system "
    "and predict its time, utilisation, cost and power (DFModel's model, no commercial "
    "solver, seconds on a laptop).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    epilog=_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
)

BUILTIN_EXAMPLE = "gpt3_1T_sn30.toml"


def _builtin() -> Path:
    return Path(__file__).parent / "examples" / BUILTIN_EXAMPLE


def _fail(exc: DfsearchError) -> typer.Exit:
    typer.echo(str(exc), err=True)
    return typer.Exit(exc.exit_code)


def _write_json(obj: Any, dest: str) -> None:
    text = json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n"
    if dest == "-":
        sys.stdout.write(text)
    else:
        _write_file(Path(dest), text)


def _write_file(path: Path, text: str) -> None:
    """Write an output; a failure (disk full, folder removed meanwhile) is a clean exit 2."""
    try:
        path.write_text(text)
    except OSError as e:
        typer.echo(f"{path}: cannot write: {e.strerror or e}.", err=True)
        raise typer.Exit(2) from None


def _json_default(o: Any) -> Any:
    if hasattr(o, "label"):
        return o.label
    if isinstance(o, float):
        return None
    raise TypeError(type(o).__name__)


def _finite(obj: Any) -> Any:
    """Replace inf/nan (not JSON) by None."""
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


@contextlib.contextmanager
def _compile_notice(enabled: bool, line: _ProgressLine | None = None) -> Iterator[None]:
    """Say so on stderr when the evaluator is compiled (the first run after an install), on
    a line of its own (the progress ``line``, if drawn, is closed first)."""
    if not enabled:
        yield
        return
    from dfsearch.cost._jit import on_first_compilation, shipped_code_note

    def say() -> None:
        if line is not None:
            line.end()
        sys.stderr.write(f"compiling the evaluator, once: up to ~20 s on 2 cores (cached for later runs; {shipped_code_note()}) ...\n")
        sys.stderr.flush()

    with on_first_compilation(say):
        yield


class _ProgressLine:
    """The run's progress line on stderr, rewritten in place: elapsed time, outer choices,
    best, lower bound, gap, evaluations. The search may call it often; it redraws at most
    every ``MIN_INTERVAL_S`` (the clock is read for the display only, never by the search).
    ``end`` draws the last record it held back and closes the line with a newline however
    the search stopped (pruned, budget, gap, Ctrl-C), so the report starts on a line of its
    own."""

    MIN_INTERVAL_S = 0.2

    def __init__(self, stream: Any = None, clock: Any = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.clock = time.monotonic if clock is None else clock
        self.start = self.clock()
        self.shown = -math.inf  # when the line was last drawn
        self.pending: SearchProgress | None = None  # a record not drawn yet
        self.open = False

    def __call__(self, p: SearchProgress) -> None:
        now = self.clock()
        if now - self.shown < self.MIN_INTERVAL_S:
            self.pending = p
            return
        self._draw(p, now)

    def _draw(self, p: SearchProgress, now: float) -> None:
        self.stream.write(f"\r  {progress_text(p, now - self.start)}   ")
        self.stream.flush()
        self.shown, self.pending, self.open = now, None, True

    def end(self) -> None:
        if self.pending is not None:
            self._draw(self.pending, self.clock())
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False


def progress_text(p: SearchProgress, elapsed_s: float) -> str:
    """``searching 1m05s: 12/40 outer choices, best 1.234 s, bound 1.2 s, gap 2.72%,
    1,234,567/20,000,000 evaluations``."""
    minutes, seconds = divmod(int(elapsed_s), 60)
    parts = [f"{p.done}/{p.total} outer choices"]
    parts.append(f"best {p.best_s:.6g} s" if p.best_s is not None else "no feasible mapping yet")
    if p.bound_s is not None:
        parts.append(f"bound {p.bound_s:.6g} s")
    if p.gap is not None:
        parts.append(f"gap {p.gap:.2%}")
    budget = f"/{p.budget:,}" if p.budget else ""
    parts.append(f"{p.evaluations:,}{budget} evaluations")
    return f"searching {minutes}m{seconds:02d}s: " + ", ".join(parts)


def _progress(enabled: bool) -> _ProgressLine | None:
    return _ProgressLine() if enabled else None


def _check_args(
    *,
    inputs: tuple[Path | str | None, ...] = (),
    outputs: dict[str, Path | str | None] | None = None,
    seed: int | None = None,
    strategies: dict[str, str | None] | None = None,
    gap: float | None = None,
    jobs: str | None = None,
) -> None:
    """Exit 2 at once on arguments that would only fail after the work is done: an output
    (option name -> path; '-' is stdout) in a missing or read-only folder, on a folder, on an
    input file or on another output; a seed numpy and optuna reject; a strategy name
    (search.strategy / search.assignment -> value) that is not registered; a process count
    (``--jobs``) that is not a whole number in ``search.jobs``'s range."""
    problems = []
    if jobs is not None and _jobs_number(jobs) is None:
        hi = int(RANGES["search.jobs"].hi)
        problems.append(f"--jobs {jobs}: must be a whole number of processes from 1 to {hi}.")
    if seed is not None and (issue := seed_issue("--seed", seed)) is not None:
        problems.append(issue.render())
    if gap is not None and not 0 <= gap < 1:
        problems.append(f"--gap {gap:g}: must be >= 0 and < 1 (a relative gap: 0.01 = 1 %).")
    for kind, name in (strategies or {}).items():
        if name is not None and (issue := strategy_issue(f"--{kind}", kind, name)) is not None:
            problems.append(issue.render())
    ins = [Path(i) for i in inputs if i is not None]
    seen: list[Path] = []
    for option, out in (outputs or {}).items():
        if out is None or str(out) == "-":
            continue
        problem = _output_problem(Path(out), ins, seen)
        if problem:
            problems.append(f"{option} {out}: {problem}")
        seen.append(Path(out))
    if problems:
        typer.echo("\n".join(problems), err=True)
        raise typer.Exit(2)


def _jobs_number(text: str) -> int | None:
    """``--jobs`` as a process count within ``search.jobs``'s range, else None."""
    try:
        n = int(text.strip())
    except ValueError:
        return None
    return n if RANGES["search.jobs"].lo <= n <= RANGES["search.jobs"].hi else None


def _output_problem(out: Path, inputs: list[Path], others: list[Path]) -> str | None:
    import os

    if any(_same_file(out, i) for i in inputs):
        return "is an input file of this command; refusing to overwrite it. Choose another path."
    if any(_same_file(out, o) for o in others):
        return "is already the path of another output. Choose another path."
    if out.is_dir():
        return "is a folder; expected a file path."
    if out.is_file() and _is_spec(out):
        return ("is an existing spec or DFModel input; refusing to overwrite it (did the option take "
                "the spec's path as its value? Put the spec first, or '--json -' for stdout).")
    folder = out.parent
    if not folder.is_dir():
        return f"cannot write: the folder {str(folder)!r} does not exist. Create it first."
    if not os.access(folder, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        return "cannot write: permission denied."
    return None


def _is_spec(path: Path) -> bool:
    """A spec (TOML with a [system], [graph] or [workload] table) or a DFModel input (with a
    dataflow_graph): an input of ours, never an output."""
    try:
        head = path.read_bytes()[:65536].decode("utf-8", "replace")
    except OSError:
        return False
    lines = {line.split("#")[0].strip() for line in head.splitlines()}
    return bool(lines & {"[system]", "[graph]", "[workload]"}) or any(
        line.startswith("dataflow_graph") for line in lines)


def _same_file(a: Path, b: Path) -> bool:
    import os

    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


SpecArg = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional
    typer.Argument(metavar="SPEC", help="Spec file (TOML) or DFModel setup.txt. Omit for the built-in example.", show_default=False),
]
JsonOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--json", metavar="PATH", help="Also write the result as JSON to PATH ('-' = stdout)."),
]


EquationsOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--equations", metavar="NAME", help="The DFModel equation set of a pre-v1 input (field 'miscellany'), which its text cannot tell: 'legacy' (DFModel's Compare_w_existing script, the default) or 'design_space' (its design-space runs: FFT/DSE, DLRM/DSE). Other inputs state their set ('v1', 'v2'); the option must then agree (docs/model.md, \"Equation sets\")."),
]


JobsOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--jobs", "-j", metavar="N", help="Processes that search the point together (default: the spec's search.jobs, 1). The result is the same for every N, bit for bit; only the wall time changes. Outer choices are solved ahead in N worker processes (each loads the compiled code from the disk cache); work done ahead on choices the search then prunes is thrown away."),
]


def _equations(name: str | None) -> Any:
    """The ``Equations`` member named by --equations (None when left out); exit 2 on an
    unknown name."""
    if name is None:
        return None
    try:
        return Equations.from_label(name)
    except KeyError:
        labels = quote_list(e.label for e in Equations)
        typer.echo(f"--equations must be one of {labels}. Got {name!r} instead.", err=True)
        raise typer.Exit(2) from None


def _strategy_help(kind: str) -> str:
    """Option help listing every registered strategy with its one-line summary."""
    if kind == "strategy":
        head = ("How the outer choices (network shape x tile count x configuration count) are "
                "explored (default: the spec's search.strategy, 'auto'):")  # fmt: skip
        registry = OUTER_STRATEGIES
    else:
        head = ("How the kernels of one outer choice are assigned to configurations (default: "
                "the spec's search.assignment, 'auto'):")  # fmt: skip
        registry = ASSIGNMENT_STRATEGIES
    items = "; ".join(f"'{name}' = {s.summary}" for name, s in registry.items())
    return f"{head} {items}. The report's 'search' line names the strategies that ran."


@app.command()
def run(
    spec: SpecArg = None,
    seed: Annotated[Optional[int], typer.Option(help="Random seed (default: the spec's search.seed). Same spec and seed, same answer, on any machine.")] = None,  # noqa: UP045
    time_limit: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--time-limit", metavar="S", min=0.0, help="Safety stop after S seconds of search (compilation excluded). A search it stops is reported as 'stopped_by_limit', not proven, and may depend on machine speed."),
    ] = None,
    max_evaluations: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option("--max-evaluations", metavar="N", min=1, help="Work budget in configuration costings (default: the spec's search.max_evaluations, 20 million). Deterministic: the same on any machine."),
    ] = None,
    strategy: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--strategy", metavar="NAME", help=_strategy_help("strategy")),
    ] = None,
    assignment: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--assignment", metavar="NAME", help=_strategy_help("assignment")),
    ] = None,
    json_out: JsonOpt = None,
    mapping_out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--mapping-out", metavar="PATH", help="Write the best mapping as a mapping file (TOML) for 'dfsearch eval'."),
    ] = None,
    gap: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--gap", metavar="G", help="Stop as soon as the best mapping is proven within the relative gap G of the lower bound, (best - bound) / best, 0 <= G < 1 (default: the spec's search.gap, 0 = search to the end). Deterministic: it depends on work done only. The result says stopped_by 'gap'."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    equations: EquationsOpt = None,
    jobs: JobsOpt = None,
) -> None:
    """Search the best mapping and report it. With no SPEC: the README GPT-3 1T example.

    The report ends with a status: OPTIMAL (a lower bound meets the answer),
    FEASIBLE_NOT_PROVEN (with the lower bound and the largest possible gap; also a search
    that --gap stopped, stopped_by 'gap'), STOPPED_BY_LIMIT (a work budget or --time-limit fired) or INTERRUPTED (Ctrl-C: the best
    mapping so far is still reported and written, exit code 130).

    Report terms (docs/design.md, glossary): a configuration is a set of kernels on the chip
    at once; its II is its time per graph execution (compute, memory and network time
    combined by the overlap mode: max or sum); the all-config II is the sum over
    configurations; the pipeline factor is 1 + (PP - 1) / (micro-batches x max(layers per
    stage - 1, 1)); p2p is the pipeline's point-to-point time per batch; final_s, the time per
    global batch, is (all-config II x pipeline factor x layers per stage x global batch / DP
    + p2p) / copies; the lower bound is a time no mapping can beat, and the gap is
    final_s / bound - 1.

    Strategies: --strategy chooses how outer choices are explored, --assignment how one
    outer choice is solved (docs/design.md, "Search strategies"); only strategies that can
    prove optimality can make a run OPTIMAL."""
    from dfsearch import api  # the search behind it loads Numba

    path = spec or _builtin()
    _check_args(inputs=(path,), outputs={"--json": json_out, "--mapping-out": mapping_out}, seed=seed,
                strategies={"strategy": strategy, "assignment": assignment}, gap=gap, jobs=jobs)  # fmt: skip
    eq = _equations(equations)
    progress = _progress(not quiet and sys.stderr.isatty() and json_out != "-")
    try:
        s = load_spec(path, equations=eq)
        for field, name in (("strategy", strategy), ("assignment", assignment), ("gap", gap), ("jobs", _jobs_number(jobs or ""))):  # a count; None when not given
            if name is not None:
                s = replace_field(s, f"search.{field}", name)
        with _compile_notice(not quiet, progress):
            result = api.run(
                s, seed=seed, time_limit_s=time_limit, max_evaluations=max_evaluations,
                progress=progress,
            )  # fmt: skip
    except (SpecError, SolverUnavailableError) as exc:
        raise _fail(exc) from None
    except InfeasibleError as exc:
        if json_out and exc.result is not None:
            _write_json(_finite(exc.result.to_json()), json_out)
        typer.echo(str(exc), err=True)
        interrupted = exc.result is not None and exc.result.status is RunStatus.INTERRUPTED
        raise typer.Exit(130 if interrupted else 1) from None
    finally:
        if progress is not None:
            progress.end()
    _write_run(result, path, json_out, mapping_out)


def _write_run(result, path: Path, json_out: str | None, mapping_out: Path | None) -> None:
    """The outputs of ``run``: the report (unless the JSON goes to stdout), the JSON, the
    mapping file; exit code 130 after Ctrl-C."""
    if json_out != "-":
        typer.echo(format_run(result, title=f"dfsearch {__version__}: {path}"))
    if json_out:
        _write_json(_finite(result.to_json()), json_out)
    if mapping_out and result.stages is not None and result.stages.has_cuts:
        typer.echo(f"--mapping-out {mapping_out}: the best mapping has stage boundaries inside a "
                   "layer (search.stage_cuts), which a mapping file cannot express (stage_layers "
                   "counts whole layer-graph executions); the report and --json show it. Run "
                   "without search.stage_cuts for a mapping file.", err=True)  # fmt: skip
        raise typer.Exit(2)
    if mapping_out:
        from dfsearch.mapping import decision_to_mapping, mapping_to_toml

        plan = result.stages
        names = plan.names["layers"] if plan is not None else None
        part = result.partition
        names = part.names if part is not None else names
        m = decision_to_mapping(result.spec, result.evaluation.decision, names)
        m |= plan.mapping() if plan is not None else {}
        m |= part.mapping(result.spec) if part is not None else {}
        _write_file(mapping_out, mapping_to_toml(m))
    if result.status is RunStatus.INTERRUPTED:
        typer.echo("interrupted: the mapping above is the best found so far, not proven.", err=True)
        raise typer.Exit(130)


@app.command("eval")
def eval_(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="Spec file (TOML) or DFModel setup.txt.")],
    mapping: Annotated[Path, typer.Option("--mapping", metavar="FILE", help="Mapping file (TOML or the JSON of 'run --json'); see docs/mapping.md.")],
    json_out: JsonOpt = None,
    equations: EquationsOpt = None,
) -> None:
    """Evaluate one given mapping (no search) and report it."""
    _check_args(inputs=(spec, mapping), outputs={"--json": json_out})
    eq = _equations(equations)
    from dfsearch import api, plan  # the model behind them loads Numba

    try:
        s = load_spec(spec, equations=eq)
        s = api.with_mapping_training(s, mapping)  # the training choices a run made, if any
        with _compile_notice(json_out != "-"):
            ev, pieces = api.evaluate_mapping(s, mapping)
    except SpecError as exc:
        raise _fail(exc) from None
    part = pieces if isinstance(pieces, PartitionPlan) else None
    stages = None if part is not None else pieces
    if json_out != "-":
        lines = [f"dfsearch {__version__}: {spec} with {mapping}", *describe_spec(s),
                 *format_evaluation(ev, s, stages), *(stage_lines(stages) if stages else []),
                 *(partition_lines(part) if part is not None and ev.feasible else [])]
        typer.echo("\n".join(lines))
    if json_out:
        status = RunStatus.EVALUATED if ev.feasible else RunStatus.INFEASIBLE
        stats = SearchStats("given", 0.0, 1, s.search.seed, status, None, 0)
        extra = {"evaluator_status": ev.status.label, "violation": ev.violation}
        if not ev.feasible:
            extra |= {"violation_unit": UNITS.get(ev.status, ""), "violation_message": violation_text(s, ev)}
        res = plan.kind_of(s).mapping_result(s, ev, pieces, stats)
        _write_json(_finite(res.to_json() | extra), json_out)
    if not ev.feasible:
        typer.echo(f"{mapping}: infeasible mapping: {violation_text(s, ev)}.", err=True)
        raise typer.Exit(1)


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Spec, DFModel setup.txt or graph file written by 'generate'.")],
    json_out: JsonOpt = None,
    equations: EquationsOpt = None,
) -> None:
    """Check an input and print a summary (kernels, connections, FLOP, weights, system)."""
    _check_args(inputs=(file,), outputs={"--json": json_out})
    eq = _equations(equations)
    try:
        obj = load_input(file, equations=eq)
    except SpecError as exc:
        raise _fail(exc) from None
    graph = obj if isinstance(obj, Graph) else obj.graph
    summary: dict[str, Any] = {
        "file": str(file),
        "kind": "graph" if isinstance(obj, Graph) else "spec",
        "kernels": len(graph.kernels),
        "connections": len(graph.connections),
        "flop_per_layer": graph.flop,
        "weight_bytes": sum((k.weight_bytes or 0.0) for k in graph.kernels),
        "training": graph.is_training,
    }
    if isinstance(obj, Graph):
        lines = describe_graph(graph)
    else:
        s = obj.system
        summary |= {
            "workload": obj.workload.kind.label,
            "num_chip": s.num_chip,
            "peak_gflops_per_chip": s.accelerator.peak_gflops,
            "system_peak_gflops": s.accelerator.peak_gflops * s.num_chip,
            "network": [
                {"topology": d.topology.label, "size": d.size or None, "link_bw_GBps": d.link_bw_GBps,
                 "parallelism": d.parallelism.label if d.parallelism.value else None}
                for d in s.network
            ],
            "equations": obj.execution.equations.label,
        }
        lines = describe_spec(obj)
    if json_out != "-":
        typer.echo("\n".join([f"{file}: valid"] + lines))
    if json_out:
        _write_json(summary, json_out)


@app.command()
def convert(
    setup: Annotated[Path, typer.Argument(metavar="SETUP", help="DFModel setup.txt (protobuf text format).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the dfsearch TOML spec.")],
    equations: EquationsOpt = None,
) -> None:
    """Convert a DFModel setup.txt into a dfsearch TOML spec (same model, same numbers)."""
    _check_args(inputs=(setup,), outputs={"--output": output})
    eq = _equations(equations)
    try:
        spec = load_spec(setup, equations=eq)
    except SpecError as exc:
        raise _fail(exc) from None
    _write_file(output, spec_to_toml(spec))
    typer.echo(f"wrote {output} ({len(spec.graph.kernels)} kernels, {len(spec.graph.connections)} connections)")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def generate(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help="Generator: llm, llm-fwd, llm-decode, llm-serving, dlrm, hpl or fft.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the graph file (TOML).")],
) -> None:
    """Write the dataflow graph of a workload generator, e.g.
    'dfsearch generate llm --hidden 25600 --num-head 160 --head-dim 160 --seq 2048 --word 2 -o g.toml'.
    'dfsearch generate KIND --help-params' lists a generator's parameters."""
    _check_args(outputs={"--output": output})
    args = list(ctx.args)
    if "--help-params" in args and kind in GENERATORS:
        g = GENERATORS[kind]
        typer.echo(f"{kind}: {g.help}")
        for p in g.params:
            if p.required:
                req = "required"
            elif p.default is None:
                req = "optional"
            else:
                req = f"default {int(p.default) if p.type is bool else p.default}"
            typer.echo(f"  --{p.name.replace('_', '-'):<18} {p.help} ({req})")
        return
    params: dict[str, Any] = {}
    bad: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and i + 1 < len(args):
            name, val = a[2:].replace("-", "_"), args[i + 1]
            try:
                params[name] = int(val)
            except ValueError:
                bad.append(f"--{a[2:]} must be an integer. Got {val!r} instead.")
            i += 2
        else:
            bad.append(f"unexpected argument {a!r} (expected --name value pairs)")
            i += 1
    if bad:
        typer.echo("\n".join(bad), err=True)
        raise typer.Exit(2)
    try:
        graph = gen(kind, params, path="generate")
    except SpecError as exc:
        raise _fail(exc) from None
    header = f"dfsearch generate {kind} " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in params.items())
    _write_file(output, graph_to_toml(graph, header=header))
    typer.echo(f"wrote {output} ({len(graph.kernels)} kernels, {len(graph.connections)} connections, {graph.flop:.6g} FLOP)")


@app.command()
def check(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="Spec file (TOML) or DFModel setup.txt.")],
    time_limit: Annotated[
        float, typer.Option("--time-limit", metavar="S", help="Time limit of the exact solver.")
    ] = 60.0,
    seed: Annotated[Optional[int], typer.Option(help="Random seed.")] = None,  # noqa: UP045
    json_out: JsonOpt = None,
    equations: EquationsOpt = None,
) -> None:
    """Run the search and an exact solver (OR-Tools CP-SAT) on the same instance and report
    how far the search is from the optimum (or from the solver's bound). Needs
    'pip install "dfsearch[exact]"'."""
    _check_args(inputs=(spec,), outputs={"--json": json_out}, seed=seed)
    eq = _equations(equations)
    from dfsearch.check import check as run_check  # the search behind it loads Numba

    try:
        s = load_spec(spec, equations=eq)
        with _compile_notice(json_out != "-"):
            result = run_check(s, time_limit_s=time_limit, seed=s.search.seed if seed is None else seed)
    except (SpecError, InfeasibleError, SolverUnavailableError) as exc:
        raise _fail(exc) from None
    data = result.to_json()
    if json_out != "-":
        typer.echo("\n".join(_check_lines(spec, data, result.outer)))
    if json_out:
        _write_json(_finite(data), json_out)


def _check_lines(spec: Path, data: dict[str, Any], outer: Any) -> list[str]:
    """The text report of 'dfsearch check': two verdicts, never one that overstates."""
    h, e = data["heuristic"], data["exact"]

    def num(x: float | None) -> str:
        return "n/a" if x is None else format(x, ".10g")

    where = f"shape {'x'.join(map(str, outer.shape))}, {outer.num_tile} tile(s), {outer.num_config} configuration(s)"
    lines = [
        f"dfsearch {__version__}: exact check of {spec}",
        f"heuristic  final_s {num(h['final_s'])} in {h['seconds']:.3g} s; search status {h['status']}, "
        f"lower bound {num(h['lower_bound_s'])} s",
        f"exact      {e['status']} for the heuristic's outer choices ({where}): final_s {num(e['final_s'])}, "
        f"bound {num(e['bound_s'])} s, in {e['seconds']:.3g} s",
    ]
    if data.get("gap") is not None:
        kind = "vs the exact optimum" if data["gap_kind"] == "vs_optimum" else "at most, vs the exact bound"
        lines.append(f"gap        {data['gap']:.4%} {kind}, within these outer choices only")
    if data["overall_status"] == RunStatus.OPTIMAL.label:
        lines.append("overall    proven optimal over every outer choice (the search's bounds rule out the others)")
    else:
        og = data.get("overall_gap")
        bound = f"gap to the optimum <= {og:.4%}" if og is not None else "no bound on the gap"
        lines.append(f"overall    NOT proven optimal over the whole space ({data['overall_status']}): other outer "
                     f"choices are certified only by the search's lower bound; {bound}")  # fmt: skip
    return lines


# ----------------------------------------------------------------------------- studies
def _objectives(text: str | None, option: str) -> tuple[str, ...] | None:
    try:
        return parse_objectives(text, option) if text else None
    except SpecError as exc:
        raise _fail(exc) from None


@app.command()
def sweep(
    study: Annotated[Path, typer.Argument(metavar="STUDY", help="Study file (TOML): a base spec, axes, filters; docs/studies.md.")],
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Results folder: results.csv (one row per point) is written there, row by row.")],
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, metavar="N", help="Worker processes (each compiles once); 1 = this process.")] = 1,
    dask: Annotated[Optional[str], typer.Option("--dask", metavar="ADDRESS", help="Run the points on a Dask distributed scheduler (tcp://host:8786); needs 'pip install \"dfsearch[distributed]\"'.")] = None,  # noqa: UP045
    fresh: Annotated[bool, typer.Option("--fresh", help="Start the table anew instead of resuming (a table written for another study is refused otherwise).")] = False,
    pareto: Annotated[Optional[str], typer.Option("--pareto", metavar="OBJECTIVES", help="Then print the Pareto front over 2 or 3 of throughput, cost, power (e.g. 'throughput,cost').")] = None,  # noqa: UP045
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the study and list its points; search nothing.")] = False,
    json_out: Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Also write a summary as JSON to PATH ('-' = stdout).")] = None,  # noqa: UP045
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress line.")] = False,
    sample: Annotated[Optional[str], typer.Option("--sample", metavar="METHOD", help="Sample instead of enumerating: 'nsga2' (Optuna's NSGA-II over the axes, optimising the --pareto objectives, default throughput,cost).")] = None,  # noqa: UP045
    trials: Annotated[int, typer.Option("--trials", min=1, metavar="N", help="--sample: number of trials.")] = 100,
    sample_seed: Annotated[int, typer.Option("--seed", min=0, metavar="S", help="--sample: the sampler's seed (same seed, same points).")] = 0,
) -> None:
    """Search every point of a design-space study and stream one row per point to
    DIR/results.csv. Interrupted (Ctrl-C, kill), the same command resumes where it stopped;
    a table written for another study (or a changed base spec) is refused unless --fresh.
    Same study and seed give the same table for any --jobs (the seconds column aside).
    With --sample nsga2, NSGA-II trials choose the points (docs/studies.md)."""
    from dfsearch.study import nsga, runner  # the search behind them loads Numba

    _check_args(inputs=(study, output / "results.csv"), outputs={"--json": json_out})
    objectives = _objectives(pareto, "--pareto")
    if sample not in (None, "nsga2"):
        typer.echo(f"--sample must be 'nsga2'. Got {sample!r} instead.", err=True)
        raise typer.Exit(2)
    if sample and (jobs > 1 or dask):
        typer.echo("--sample nsga2 runs its trials one after the other in this process: drop --jobs / --dask.", err=True)
        raise typer.Exit(2)
    try:
        s = load_study(study)
        if dry_run:
            _dry_run(study, s)
            return
        show = not quiet and json_out != "-"
        if sample:
            objectives = objectives or nsga.DEFAULT_OBJECTIVES
            with _compile_notice(show):
                summary = nsga.nsga_sweep(s, output, trials=trials, seed=sample_seed, objectives=objectives,
                                     fresh=fresh, progress=commands.progress_printer() if show else None)  # fmt: skip
        else:
            with _compile_notice(show and jobs == 1 and not dask):  # workers compile on their own
                summary = runner.sweep(s, output, jobs=jobs, fresh=fresh, dask=dask,
                                       progress=commands.progress_printer() if show else None)  # fmt: skip
    except DfsearchError as exc:
        raise _fail(exc) from None
    except (runner.SweepInterrupted, KeyboardInterrupt) as exc:
        typer.echo(str(exc) or "interrupted; run the same command again to resume.", err=True)
        raise typer.Exit(130) from None
    try:
        about.write_info(output, about.info_of(s))  # the workload and axes, for plot and report
    except DfsearchError as exc:
        raise _fail(exc) from None
    data = summary.to_json()
    lines = commands.summary_lines(summary)
    if objectives:
        try:
            header, rows = commands.load_results(output)
        except DfsearchError as exc:
            raise _fail(exc) from None
        lines += commands.front_lines(header, rows, objectives)
        data["pareto"] = commands.front_json(header, rows, objectives)
    if json_out != "-":
        typer.echo("\n".join(lines))
    if json_out:
        _write_json(_finite(data), json_out)


@app.command()
def codesign(
    study: Annotated[Path, typer.Argument(metavar="STUDY", help="Co-design study (TOML): workloads, chip and system variables, budgets, objectives, sampler, trials, seed; docs/codesign.md.")],
    output: Annotated[Path, typer.Option("-o", "--output", metavar="DIR", help="Folder for trials.csv, pareto.csv, pareto.json, summary.json and best_chip.toml.")],
    json_out: Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Also write the summary as JSON to PATH ('-' = stdout).")] = None,  # noqa: UP045
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress line.")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="Start trials.csv anew instead of reading back the trials an earlier run of the same study wrote.")] = False,
) -> None:
    """Search chip and system parameters (compute/SRAM split, memory and link technology,
    sizes) under area, power and cost budgets with NSGA-II or TPE, the exact mapping search
    inside each trial; print the Pareto front and write the best chip as a runnable spec."""
    _check_args(inputs=(study,), outputs={"--json": json_out})
    show = not quiet and json_out != "-"
    try:
        with _compile_notice(show):
            lines, summary = codesign_command(study, output, show, fresh)
    except DfsearchError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; run the same command again to resume (the finished trials are in trials.csv).", err=True)
        raise typer.Exit(130) from None
    if json_out != "-":
        typer.echo("\n".join(lines))
    if json_out:
        _write_json(_finite(summary), json_out)


def _dry_run(path: Path, s: Any) -> None:
    """``sweep --dry-run``: every kept point, checked, one line each (streamed)."""
    kept = 0
    for p in s.iter_points():
        s.point_spec(p)
        typer.echo(f"  point {p.index}: {p.labels(s.axes)}")
        kept += 1
    typer.echo(f"{path}: {kept} points ({s.size()} before filters)")


@app.command()
def serve(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="An llm_serving spec with a [serve] table: the request rate (rate_per_s), prompt and output lengths, the SLOs (ttft_p99_s, tpot_p99_s), the price per chip-hour and the space searched (docs/serving.md, 'Capacity search').")],
    json_out: JsonOpt = None,
    csv_out: Annotated[Optional[Path], typer.Option("--csv", metavar="PATH", help="Write every deployment looked at, one row each, with every serving metric.")] = None,  # noqa: UP045
    step_cache: Annotated[Optional[Path], typer.Option("--step-cache", metavar="PATH", help="Keep the searched step times in this file and reuse them in later runs of the same model and chips.")] = None,  # noqa: UP045
) -> None:
    """Find the cheapest deployment (chip, co-located or split prefill/decode, TP x PP per
    pool, replicas, batch cap, chunk size) that serves the spec's request rate (serve.rate_per_s)
    within its P99 TTFT and P99 TPOT SLOs (serve.ttft_p99_s, serve.tpot_p99_s), and say what
    binds. Exhaustive up to serve.exhaustive_limit deployments, sampled (TPE, not proven) above.
    Exit 1 when no deployment meets them."""
    _check_args(inputs=(spec,), outputs={"--json": json_out, "--csv": csv_out})
    from dfsearch.capacity.command import serve as serve_search  # loads the search (Numba)

    try:
        with _compile_notice(json_out != "-"):
            lines = serve_search(spec, json_out=json_out, csv_out=csv_out, step_cache=step_cache)
        typer.echo("\n".join(lines))
    except DfsearchError as exc:
        raise _fail(exc) from None


@app.command("pareto")
def pareto_cmd(
    results: Annotated[Path, typer.Argument(metavar="RESULTS", help="A results folder written by 'dfsearch sweep' (or its results.csv).")],
    objectives: Annotated[str, typer.Option("--objectives", metavar="OBJECTIVES", help="2 or 3 of throughput, cost, power, separated by commas.")] = "throughput,cost",
    json_out: JsonOpt = None,
) -> None:
    """Print the exact Pareto front of a results table: the feasible points no other point
    beats in every objective (throughput maximised, cost and power minimised)."""
    import io

    _check_args(inputs=(commands.results_path(results),), outputs={"--json": json_out})
    names = _objectives(objectives, "--objectives")
    try:
        header, rows = commands.load_results(results, keep=commands.FRONT_COLUMNS)
        if json_out:  # the front's rows again, with every column
            front = {r["point"] for r in pareto_front(rows, names)}
            _, full = commands.load_results(results, points=front, stream=io.StringIO())
    except DfsearchError as exc:
        raise _fail(exc) from None
    if json_out != "-":
        typer.echo("\n".join(commands.front_lines(header, rows, names)))
    if json_out:
        _write_json(_finite(commands.front_json(header, rows, names, full)), json_out)


@app.command()
def plot(
    results: Annotated[Path, typer.Argument(metavar="RESULTS", help="A results folder written by 'dfsearch sweep' (or its results.csv).")],
    kind: Annotated[str, typer.Option("--kind", metavar="KIND", help="heatmap (a metric per accelerator x topology, one panel per other-axes pair), breakdown (compute/memory/network bars), pareto (scatter with the front) or roofline (GFLOP/s per chip against operational intensity over DRAM and network).")] = "heatmap",
    metric: Annotated[str, typer.Option("--metric", metavar="COLUMN", help="Table column of the heat map (utilization, final_s, cost_efficiency, power_efficiency, ...).")] = "utilization",
    objectives: Annotated[str, typer.Option("--objectives", metavar="OBJECTIVES", help="Pareto plot: 2 or 3 of throughput, cost, power; the first two are the plot's axes.")] = "throughput,cost",
    output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="PATH", help="Image file (.png, .svg, .pdf); default RESULTS/<kind>[_<metric>].png.")] = None,  # noqa: UP045
) -> None:
    """Draw a figure of a results table (needs 'pip install "dfsearch[plot]"', matplotlib)."""
    if kind not in plots.KINDS:
        typer.echo(f"--kind must be one of {', '.join(plots.KINDS)}. Got {kind!r} instead.", err=True)
        raise typer.Exit(2)
    names = _objectives(objectives, "--objectives")
    folder = results if results.is_dir() else results.parent
    dest = output or folder / (f"{kind}_{metric}.png" if kind == "heatmap" else f"{kind}.png")
    _check_args(inputs=(commands.results_path(results),), outputs={"--output": dest})
    if (problem := plots.format_problem(dest)) is not None:
        typer.echo(f"--output {dest}: {problem}", err=True)
        raise typer.Exit(2)
    try:
        header, rows = commands.load_results(results, keep=plots.columns_of(kind, metric))
        info = about.read_info(folder)
        workload = info.workload if info is not None else None
        if kind == "heatmap":
            fig = plots.heatmap_figure(header, rows, metric, workload)
        elif kind == "breakdown":
            fig = plots.breakdown_figure(header, rows, workload)
        elif kind == "roofline":
            fig = plots.roofline_figure(header, rows, workload)
        else:
            fig = plots.pareto_figure(header, rows, names, workload)
        plots.save(fig, dest)
    except (SpecError, SolverUnavailableError) as exc:
        raise _fail(exc) from None
    typer.echo(f"wrote {dest}")


@app.command("report")
def report_cmd(
    results: Annotated[Path, typer.Argument(metavar="RESULTS", help="A results folder written by 'dfsearch sweep' (or its results.csv).")],
    html_out: Annotated[Path, typer.Option("--html", metavar="PATH", help="The HTML file to write ('-' = stdout): one self-contained page (tables, figures as embedded PNG).")],
    study: Annotated[Optional[Path], typer.Option("--study", metavar="STUDY", help="The study file, for its workload and axes when the folder has no study.json (a sweep of an older version).")] = None,  # noqa: UP045
    objectives: Annotated[str, typer.Option("--objectives", metavar="OBJECTIVES", help="The Pareto set and plot: 2 or 3 of throughput, cost, power.")] = "throughput,cost",
) -> None:
    """Write one HTML page of a study: summary (workload, axes, points, failures and why), the
    best points, the Pareto set, a summary per axis and the figures (embedded; they need
    'pip install "dfsearch[plot]"', without it the page says so and keeps the tables)."""
    names = _objectives(objectives, "--objectives")
    _check_args(inputs=(commands.results_path(results), study), outputs={"--html": html_out})
    folder = results if results.is_dir() else results.parent
    try:
        header, rows = commands.load_results(results)
        info = about.info_of(load_study(study)) if study is not None else about.read_info(folder)
        text = html_report.report_html(header, rows, info, names, str(folder))
    except DfsearchError as exc:
        raise _fail(exc) from None
    if str(html_out) == "-":
        sys.stdout.write(text)
        return
    _write_file(html_out, text)
    typer.echo(f"wrote {html_out}")


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    """Console-script entry point."""
    app()
