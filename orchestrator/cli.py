"""The `llada-bench` command: plan, sweep, verify, and the doors to report, roofline and env."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from orchestrator.actor import RunActor
from orchestrator.driver import SweepSummary, default_out_dir, run_sweep, stop_on_signals, unrun_result
from orchestrator.extrapolation import extrapolation_checks, format_checks
from orchestrator.feasibility import refuse_unmeasurable_batches
from orchestrator.plan import (
    PlanEstimate,
    PlannedRun,
    format_duration,
    hardware_profile,
    plan_runs,
    predict_plan,
    predicted_not_to_fit,
)
from orchestrator.plan_size import refuse_oversized
from orchestrator.progress import Progress
from orchestrator.store import ArtifactStore, already_done
from orchestrator.sweepdir import SweepDirError, check_writable, claim, vanishing
from orchestrator.leave_out import add_parser as add_leave_out_parser
from orchestrator.verify_command import add_parser as add_verify_parser
from specs.artifacts import SweepLayout, load_results
from specs.loader import DEFAULT_SPEC, SpecError, load_spec, read_spec_text
from specs.lock import LockHeldError, SweepLock
from specs.options import OneLineParser, positive_int, positive_number
from specs.ownership import NotOursError
from specs.results import RunStatus
from specs.safefile import UnsafeFileError
from specs.schema import ExperimentSpec

EXIT_OK, EXIT_RUNS_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 3
EXECUTORS = ("ray", "inline")

# Subcommands owned by other stages: (module, help). Imported only when used.
DELEGATED = {
    "report": ("report.cli", "render results.parquet, figures and report.html from a sweep's artifacts"),
    "roofline": ("roofline.cli", "the analytical roofline of LLaMA or LLaDA on a hardware profile"),
    "env": ("workers.env_command", "print the environment record a worker captures (GPU, CUDA, versions)"),
    "calibrate": ("workers.measure.calibrate", "measure this machine's roofs: matmul peak, bandwidth, per-op dispatch floor"),
    "train": ("miniature.cli", "train the miniature LLaMA/LLaDA pair (corpus, tokenizer, both models); resumable"),
    "download": (
        "orchestrator.assets",
        "pre-fetch a spec's models, tokenizers, datasets and scorers into the HF cache, then verify it offline",
    ),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        module = importlib.import_module(DELEGATED[argv[0]][0])
        return int(module.main(argv[1:]))
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except (SpecError, SweepDirError, LockHeldError, UnsafeFileError, NotOursError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before a sweep has its own handlers (or in plan, verify)
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def load_checked_spec(spec_arg: str) -> ExperimentSpec:
    """load_spec, plus what it cannot check without another stage's data: the plan's size and the roofline
    hardware profile."""
    spec = load_spec(spec_arg)
    try:
        refuse_oversized(spec)  # before anything is expanded
        if spec.controls.hardware.profile is not None:
            hardware_profile(spec.controls.hardware.profile)
    except SpecError as exc:
        raise SpecError(f"{spec_arg}: {exc}") from None
    return spec


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="llada-bench",
        description="Inference efficiency of LLaDA-8B next to LLaMA-3-8B: spec → plan → runs → artifacts → report.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plan = commands.add_parser("plan", help="validate a spec and list its planned runs")
    plan.add_argument("spec", nargs="?", default=DEFAULT_SPEC, help=f"spec file (default {DEFAULT_SPEC})")
    plan.add_argument(
        "--profile", metavar="NAME",
        help="predict the wall time on this roofline profile instead of controls.hardware.profile (e.g. h200)",
    )  # fmt: skip
    plan.set_defaults(handler=_plan)

    sweep = commands.add_parser("sweep", help="run every planned run through Ray into artifacts, then report")
    sweep.add_argument("spec", nargs="?", default=DEFAULT_SPEC, help=f"spec file (default {DEFAULT_SPEC})")
    sweep.add_argument("--out", type=Path, help="sweep directory (default artifacts/<spec name>)")
    sweep.add_argument("--force", action="store_true", help="rerun every run, even those already done")
    sweep.add_argument(
        "--retry-failed", action="store_true",
        help="rerun runs that ended in error or crashed (one that failed on its model's files: every resume)",
    )  # fmt: skip
    sweep.add_argument("--actors", type=positive_int, help="workers to start (default: one per GPU, else one)")
    sweep.add_argument("--no-report", action="store_true", help="skip the report at the end")
    sweep.add_argument(
        "--executor", choices=EXECUTORS, default="ray",
        help="ray (default): one actor per GPU; inline: every run in this process, without Ray (one GPU)",
    )  # fmt: skip
    sweep.add_argument(
        "--max-predicted-hours", type=positive_number, metavar="H",
        help="refuse when the runs to do are predicted (roofline, controls.hardware.profile) to take longer",
    )  # fmt: skip
    sweep.add_argument(
        "--stop-after", type=positive_number, metavar="SECONDS",
        help="inline: start no run predicted to end after this many seconds; rerun to continue",
    )  # fmt: skip
    sweep.set_defaults(handler=_sweep)

    add_verify_parser(commands)
    add_leave_out_parser(commands)

    for name, (_, text) in DELEGATED.items():
        commands.add_parser(name, help=text, add_help=False)
    return parser


def _plan(args: argparse.Namespace) -> int:
    spec = load_checked_spec(args.spec)
    planned = plan_runs(spec)
    refuse_unmeasurable_batches(spec, planned, args.spec)
    try:
        estimate = predict_plan(spec, planned, args.profile)
    except SpecError as exc:
        raise SpecError(str(exc).replace("controls.hardware.profile", "--profile") if args.profile else str(exc)) from None
    print(format_plan(planned, estimate.seconds if estimate else None))
    print(f"{len(planned)} runs planned for sweep {spec.name!r}{format_sessions(spec, len(planned))}")
    print(format_estimate(estimate, spec.controls.warmup, spec.controls.repetitions))
    return EXIT_OK


def format_estimate(estimate: PlanEstimate | None, warmup: int, repetitions: int) -> str:
    """The plan's predicted total, or why there is none."""
    if estimate is None:
        return "predicted wall time: none (set controls.hardware.profile, e.g. a100-sxm4-80gb, to predict one)"
    loads = sum(estimate.loads.values())
    return (
        f"predicted wall time on {estimate.hardware}: {format_duration(estimate.total_s)} "
        f"({estimate.total_s:.0f} s: runs {estimate.runs_s:.0f} s on the roofline with the host floor, "
        f"{warmup} warm-ups + {repetitions} repetitions per run and the generations quality needs; model loads "
        f"{loads:.0f} s; start {estimate.start_s:.0f} s; scoring not included)"
    )


def format_sessions(spec: ExperimentSpec, runs: int) -> str:
    """How the runs split into sessions ('' for one session)."""
    sessions = spec.controls.sessions
    if sessions == 1:
        return ""
    scored = " (quality scored in session 0 only)" if spec.quality.enabled else ""
    return f": {sessions} sessions of {runs // sessions} runs, each in fresh worker processes{scored}"


def format_plan(planned: list[PlannedRun], predicted_s: dict[str, float] | None = None) -> str:
    """The runs in the order they run: session, model and grid point of each."""
    header = ("run_id", "session", "model", "arch", "batch", "prompt", "gen", "steps", "block", "remasking", "cfg",
              "impl", "timed")
    if predicted_s is not None:
        header += ("predicted",)
    rows = [header] + [
        (
            run.run_id, _dash(run.config.session), run.config.model.name, run.config.model.arch, str(run.config.batch_size),
            str(run.config.prompt_length), str(run.config.generation_length), _dash(run.config.steps),
            _dash(run.config.block_length), _dash(run.config.commit_rule),
            _dash(run.config.cfg_scale if run.config.steps is not None else None), run.config.impl_name,
            _dash(run.config.timed_steps or (run.config.steps and "all")),
        )
        + ((format_duration(predicted_s[run.run_id]),) if predicted_s is not None else ())
        for run in planned
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _dash(value: object) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _sweep(args: argparse.Namespace) -> int:
    return sweep_command(
        args.spec, out=args.out, force=args.force, retry_failed=args.retry_failed, actors=args.actors,
        report=not args.no_report, executor=args.executor, max_predicted_hours=args.max_predicted_hours,
        stop_after_s=args.stop_after,
    )


def sweep_command(
    spec_arg: str,
    *,
    out: Path | None = None,
    force: bool = False,
    retry_failed: bool = False,
    actors: int | None = None,
    report: bool = True,
    actor_class: type = RunActor,
    executor: str = "ray",
    max_predicted_hours: float | None = None,
    stop_after_s: float | None = None,
) -> int:
    """`llada-bench sweep`: everything after argument parsing (fault-injection tests call it directly)."""
    spec_text = read_spec_text(spec_arg)
    spec = load_checked_spec(spec_arg)
    planned = plan_runs(spec)
    refuse_unmeasurable_batches(spec, planned, spec_arg)
    skipped = predicted_not_to_fit(spec, planned)
    layout = SweepLayout(default_out_dir(spec, out))
    _refuse_vanishing(layout.root, chosen=out is not None)
    predicting = max_predicted_hours is not None or stop_after_s is not None
    estimate = predict_plan(spec, planned) if predicting else None
    if max_predicted_hours is not None:  # before anything is written: a refusal leaves no file behind
        ids = [r.run_id for r in planned]
        done_before = set() if force else already_done(layout.root, ids, retry_failed=retry_failed) | set(skipped)
        refusal = _over_predicted_hours(estimate, planned, done_before, max_predicted_hours)
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return EXIT_USAGE
    claim(layout.root)  # a new or empty directory, or a sweep's own: nothing of the user's is touched
    check_writable(layout)  # before anything is computed
    # One sweep per directory; SIGTERM/SIGINT from here on stop it cleanly, wherever it is.
    with stop_on_signals() as stop, SweepLock(layout.lock) as lock:
        for note in lock.notes:
            print(f"note: {note}", file=sys.stderr)
        store = ArtifactStore(layout.root)
        try:
            store.open(spec, spec_text, force=force, planned=[r.run_id for r in planned])
            done = set() if force else store.completed([r.run_id for r in planned], retry_failed=retry_failed)
            store.refuse_unowned_runs([r.run_id for r in planned if r.run_id not in done])  # before any is run
            for run in planned:
                reason = skipped.get(run.run_id)
                if reason and run.run_id not in done:
                    store.write_result(unrun_result(spec.name, run, RunStatus.SKIPPED, reason))
                    done.add(run.run_id)
        except OSError as exc:  # nothing computed yet, so nothing lost
            raise SweepDirError(f"{exc.filename or layout.root}: cannot write ({exc.strerror or exc})") from None
        for note in store.notes:
            print(f"warning: {note}", file=sys.stderr)
        if store.unscored:
            print(f"warning: {unscored_note(len(store.unscored), 'earlier')}", file=sys.stderr)
        todo = len(planned) - len(done)
        print(
            f"sweep {spec.name!r}: {len(planned)} runs planned, {len(done)} already done, {todo} to run → {store.root}"
        )
        if executor == "inline":
            from orchestrator.inline import run_inline  # no Ray: one process, one device

            summary = run_inline(
                spec, planned, store, done=done, progress=Progress(total=todo), stop_after_s=stop_after_s,
                predicted_s=estimate.seconds if estimate else None,
            )  # fmt: skip
        else:
            summary = run_sweep(
                spec, planned, store, done=done, actors=actors, progress=Progress(total=todo),
                actor_class=actor_class, stop=stop,
            )  # fmt: skip
        print(format_summary(summary, store.root), flush=True)
        checks = extrapolation_checks(load_results(store.layout)) if spec.controls.extrapolation else []
        if checks:
            print(format_checks(checks), flush=True)
        if summary.write_error:
            _report_write_failure(summary)
            return EXIT_USAGE
        if summary.interrupted or stop.signum is not None:
            by = summary.interrupted or signal.Signals(stop.signum or signal.SIGINT).name
            print(
                f"interrupted by {by}: every finished run is saved and the manifest is current; "
                f"rerun the same command to resume",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        if report and not _report(store.root):
            return EXIT_USAGE
        if stop.signum is not None:  # during the report: it was written whole all the same
            return EXIT_INTERRUPTED
        return EXIT_RUNS_FAILED if summary.failed or summary.unscored or store.unscored else EXIT_OK


def unscored_note(count: int, when: str, error: str | None = None) -> str:
    """Runs measured whose quality could not be scored: not done, and how to score them."""
    cause = f" ({error.splitlines()[0]})" if error else ""
    return (f"{count} run(s) {when} were measured but their quality could not be scored{cause}, so this sweep is not "
            "complete: fix that, then rerun with --retry-failed to measure and score them")


def _refuse_vanishing(root: Path, *, chosen: bool) -> None:
    """Results that would be discarded with the container (or the Ray job): refused in the default output
    directory, where nobody chose that, and a warning when --out named the place."""
    reason = vanishing(root)
    if reason is None:
        return
    message = (
        f"{root} (in {Path.cwd()}) would vanish when this ends: it is in {reason}; run from a directory of the "
        'host (Apptainer: --bind "$PWD" --pwd "$PWD") or pass --out a path bound from it'
    )
    if not chosen:
        raise SweepDirError(message)
    print(f"warning: --out {message}", file=sys.stderr)


def _over_predicted_hours(
    estimate: PlanEstimate | None, planned: list[PlannedRun], done: set[str], hours: float
) -> str | None:
    """Why `--max-predicted-hours` refuses the runs still to do, or None."""
    if estimate is None:
        return (
            "--max-predicted-hours: the spec names no roofline profile to predict with; set "
            "controls.hardware.profile (e.g. a100-sxm4-80gb; `llada-bench roofline hardware` lists them)"
        )
    todo = [r for r in planned if r.run_id not in done]
    remaining = sum(estimate.seconds[r.run_id] for r in todo)
    if todo:  # the models still to load, and one command's start
        remaining += sum(estimate.loads.get(m, 0.0) for m in {r.config.model.name for r in todo}) + estimate.start_s
    if remaining <= hours * 3600:
        return None
    return (
        f"--max-predicted-hours {hours:g}: the runs to do are predicted to take {format_duration(remaining)} on "
        f"{estimate.hardware} (`llada-bench plan` itemises them); raise the limit or trim the grid"
    )


def _report_write_failure(summary: SweepSummary) -> None:
    """The sweep directory refused a write: say what failed and where every result it refused was kept."""
    for run_id, path in summary.rescued.items():
        print(f"kept: the result of run {run_id} is in {path}", file=sys.stderr)
    print(
        f"error: cannot write into {summary.write_error}; the sweep stopped and started no more runs "
        f"({len(summary.rescued)} finished result(s) kept elsewhere, listed above). Free space or fix the "
        "permissions, then rerun the same command: runs not in the sweep directory are computed again",
        file=sys.stderr,
    )


def format_summary(summary: SweepSummary, root: Path) -> str:
    if not summary.results and not summary.interrupted:
        return f"nothing to run: all {summary.planned} runs are already done in {root} (use --force to rerun)"
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(summary.statuses.items()))
    loads = ", ".join(f"{model} ×{n}" for model, n in sorted(summary.model_loads.items())) or "none recorded"
    unscored = summary.unscored
    return "\n".join(
        [
            f"finished {len(summary.results)} runs ({statuses}) in {summary.wall_s:.1f} s wall time",
            f"time inside runs {summary.run_seconds:.1f} s, of which measured repetitions {summary.measured_seconds:.1f} s",
            f"model loads: {loads}",
        ]
        + ([unscored_note(len(unscored), "now", unscored[0].quality_error)] if unscored else [])
    )


def _report(root: Path) -> bool:
    """Render the report at the end of a sweep; a refusal is one line, and the artifacts stay as they are."""
    render_module = importlib.import_module("report.document.render")
    render: Callable[..., object] = render_module.render_report
    try:
        render(root)
    except render_module.ReportError as exc:
        print(f"error: report not written: {exc}", file=sys.stderr)
        return False
    return True


def entry() -> None:
    """The `llada-bench` command: main's exit status, also when an interrupted Ray start left the interpreter
    unable to tear down (orchestrator/cluster.exit_process)."""
    from orchestrator.cluster import exit_process

    exit_process(main())


if __name__ == "__main__":
    entry()
