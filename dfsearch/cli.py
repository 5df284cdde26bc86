"""The ``dfsearch`` command line. Thin: parse arguments, call the API, map errors to exit codes.

Exit codes: 0 success, 1 no feasible mapping, 2 bad input (file, field path, value, expected).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from dfsearch import __version__
from dfsearch.errors import DfsearchError, InfeasibleError, SpecError

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
        Path(dest).write_text(text)


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


def _progress(enabled: bool):  # noqa: ANN202
    if not enabled:
        return None

    def show(done: int, total: int, best_s: float | None) -> None:
        best = f"best {best_s:.6g} s" if best_s is not None else "no feasible mapping yet"
        sys.stderr.write(f"\r  searching: {done}/{total} outer choices, {best}   ")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


SpecArg = Annotated[
    Optional[Path],  # noqa: UP007 - typer needs Optional
    typer.Argument(metavar="SPEC", help="Spec file (TOML) or DFModel setup.txt. Omit for the built-in example.", show_default=False),
]
JsonOpt = Annotated[
    Optional[str],  # noqa: UP007
    typer.Option("--json", metavar="PATH", help="Also write the result as JSON to PATH ('-' = stdout)."),
]


@app.command()
def run(
    spec: SpecArg = None,
    seed: Annotated[Optional[int], typer.Option(help="Random seed (default: the spec's search.seed).")] = None,  # noqa: UP007
    time_limit: Annotated[
        Optional[float],  # noqa: UP007
        typer.Option("--time-limit", metavar="S", help="Stop searching after S seconds (anytime)."),
    ] = None,
    json_out: JsonOpt = None,
    mapping_out: Annotated[
        Optional[Path],  # noqa: UP007
        typer.Option("--mapping-out", metavar="PATH", help="Write the best mapping as a mapping file (TOML) for 'dfsearch eval'."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Search the best mapping and report it. With no SPEC: the README GPT-3 1T example."""
    from dfsearch import api

    path = spec or _builtin()
    show = not quiet and sys.stderr.isatty() and json_out != "-"
    try:
        result = api.run(path, seed=seed, time_limit_s=time_limit, progress=_progress(show))
    except (SpecError, InfeasibleError) as exc:
        raise _fail(exc) from None
    from dfsearch.report import format_run

    if json_out != "-":
        typer.echo(format_run(result, title=f"dfsearch {__version__}: {path}"))
    if json_out:
        _write_json(_finite(result.to_json()), json_out)
    if mapping_out:
        from dfsearch.mapping import decision_to_mapping, mapping_to_toml

        mapping_out.write_text(mapping_to_toml(decision_to_mapping(result.spec, result.evaluation.decision)))


@app.command("eval")
def eval_(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="Spec file (TOML) or DFModel setup.txt.")],
    mapping: Annotated[Path, typer.Option("--mapping", metavar="FILE", help="Mapping file (TOML or the JSON of 'run --json'); see docs/mapping.md.")],
    json_out: JsonOpt = None,
) -> None:
    """Evaluate one given mapping (no search) and report it."""
    from dfsearch import api
    from dfsearch.mapping import load_mapping
    from dfsearch.report import describe_spec, format_evaluation

    try:
        s = api.load(spec)
        decision = load_mapping(mapping, s)
        ev = api.evaluate(s, decision)
    except SpecError as exc:
        raise _fail(exc) from None
    if json_out != "-":
        typer.echo("\n".join([f"dfsearch {__version__}: {spec} with {mapping}"] + describe_spec(s) + format_evaluation(ev)))
    if json_out:
        from dfsearch.result import RunResult, SearchStats

        stats = SearchStats("given", 0.0, 1, s.search.seed, None, None, 0, 0, False)
        _write_json(_finite(RunResult(s, ev, stats).to_json() | {"status": ev.status.label, "violation": ev.violation}), json_out)
    if not ev.feasible:
        typer.echo(f"{mapping}: infeasible mapping: {ev.status.message} (by {ev.violation:.6g}).", err=True)
        raise typer.Exit(1)


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Spec, DFModel setup.txt or graph file written by 'generate'.")],
    json_out: JsonOpt = None,
) -> None:
    """Check an input and print a summary (kernels, connections, FLOP, weights, system)."""
    from dfsearch.load import load_input
    from dfsearch.report import describe_graph, describe_spec
    from dfsearch.spec import Graph

    try:
        obj = load_input(file)
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
) -> None:
    """Convert a DFModel setup.txt into a dfsearch TOML spec (same model, same numbers)."""
    from dfsearch.io.toml_writer import spec_to_toml
    from dfsearch.load import load_spec

    try:
        spec = load_spec(setup)
    except SpecError as exc:
        raise _fail(exc) from None
    output.write_text(spec_to_toml(spec))
    typer.echo(f"wrote {output} ({len(spec.graph.kernels)} kernels, {len(spec.graph.connections)} connections)")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def generate(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help="Generator: llm, llm-fwd, llm-decode, dlrm, hpl or fft.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the graph file (TOML).")],
) -> None:
    """Write the dataflow graph of a workload generator, e.g.
    'dfsearch generate llm --hidden 25600 --num-head 160 --head-dim 160 --seq 2048 --word 2 -o g.toml'.
    'dfsearch generate KIND --help-params' lists a generator's parameters."""
    from dfsearch.io.toml_writer import graph_to_toml
    from dfsearch.kernels.generators import GENERATORS, generate as gen

    args = list(ctx.args)
    if "--help-params" in args and kind in GENERATORS:
        g = GENERATORS[kind]
        typer.echo(f"{kind}: {g.help}")
        for p in g.params:
            req = "required" if p.required else f"default {p.default}"
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
    output.write_text(graph_to_toml(graph, header=header))
    typer.echo(f"wrote {output} ({len(graph.kernels)} kernels, {len(graph.connections)} connections, {graph.flop:.6g} FLOP)")


@app.command()
def check(
    spec: Annotated[Path, typer.Argument(metavar="SPEC", help="Spec file (TOML) or DFModel setup.txt.")],
    time_limit: Annotated[
        float, typer.Option("--time-limit", metavar="S", help="Time limit of the exact solver.")
    ] = 60.0,
    seed: Annotated[Optional[int], typer.Option(help="Random seed.")] = None,  # noqa: UP007
    json_out: JsonOpt = None,
) -> None:
    """Run the search and an exact solver (OR-Tools CP-SAT) on the same instance and report
    how far the search is from the optimum (or from the solver's bound). Needs
    'pip install "dfsearch[exact]"'."""
    from dfsearch import api
    from dfsearch.errors import SolverUnavailableError

    try:
        from dfsearch.check import check as run_check

        s = api.load(spec)
        result = run_check(s, time_limit_s=time_limit, seed=s.search.seed if seed is None else seed)
    except (SpecError, InfeasibleError, SolverUnavailableError) as exc:
        raise _fail(exc) from None
    data = result.to_json()
    if json_out != "-":
        h, e = data["heuristic"], data["exact"]
        lines = [
            f"dfsearch {__version__}: exact check of {spec}",
            f"heuristic  final_s {h['final_s']:.10g}  in {h['seconds']:.3g} s",
            f"exact      {e['status']}: final_s {e['final_s'] if e['final_s'] is None else format(e['final_s'], '.10g')}, "
            f"bound {e['bound_s'] if e['bound_s'] is None else format(e['bound_s'], '.10g')} s, in {e['seconds']:.3g} s",
        ]
        if data.get("gap") is not None:
            lines.append(f"gap        {data['gap']:.4%} ({data.get('gap_kind')})")
        typer.echo("\n".join(lines))
    if json_out:
        _write_json(_finite(data), json_out)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    """Console-script entry point."""
    app()
