"""The 8B headline as the README gives it: each `results/<gpu>/headline/` (a GPU round's headline sweeps,
orchestrator/gpu_round/results.py) rendered into `headline.md` beside them and into the README's block between
HEADLINE_BEGIN and HEADLINE_END, without hand edits (`just headline-results`).

The speedups, their intervals and what they rest on are the report's (report/answer/pairing/build.py, via each sweep's
findings.json: run `llada-bench report` on each sweep first); B* over batches measured in different sweeps is
report.analysis.intervals.crossover over the same points. What this adds is the provenance a reader checks first, read
from the runs themselves: the commit they ran at, sessions x repetitions, warm-ups, whether the two models were
interleaved in every session, that no latency is extrapolated, and why any graph-captured row is missing. A
folder with no headline leaves the README's block empty.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from report.answer.findings_file import FindingsFile
from report.analysis.intervals import Speedup, crossover, crossover_text
from report.answer.pairing.build import AR_BEST_PAIRING, BEST_PAIRING, Pairing, PairingPoint
from report.analysis.parity import bracket
from specs.artifacts import SweepLayout, load_results
from specs.model_spec import CheckpointSource
from specs.options import OneLineParser
from specs.registry import family
from specs.results import RunResult
from specs.round_record import (
    EIGHT_B,
    ROUND_RECORD_FILE,
    HeadlineSweepRecord,
    RoundRecord,
    RoundRecordError,
    headline_refusal,
    models_of,
    read_round_record,
)
from specs.safefile import atomic_write

HEADLINE_BEGIN = "<!-- headline:begin (filled by `just headline-results` from results/<gpu>/headline/) -->"
HEADLINE_END = "<!-- headline:end -->"
HEADLINE_FILE = "headline.md"
RECORD_FILE = ROUND_RECORD_FILE  # orchestrator.gpu_round.results writes it beside the sweeps
CHECK_TIMED_STEPS = 4  # campaign-h100's rule: time the first 4 steps, give every other step their mean
PAIRING_NAME = {BEST_PAIRING: "fast (each at its fastest)",
                AR_BEST_PAIRING: "LLaMA at its fastest, LLaDA vanilla"}
HOST_PAIRING = "eager against eager (host overhead)"


class HeadlineError(Exception):
    """A problem the user can fix, in one line naming the file."""


def _findings(sweep: Path) -> FindingsFile:
    path = sweep / "findings.json"
    if not path.is_file():
        raise HeadlineError(f"{path}: missing; render the sweep's report first (llada-bench report {sweep})")
    return FindingsFile.model_validate_json(path.read_text(encoding="utf-8"))


def _sweeps(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "manifest.json").is_file())


def _impl(impl: str, execution: str) -> str:
    return f"{impl} ({execution})"


def _row(p: Pairing, q: PairingPoint, sweep: str) -> tuple[str, ...]:
    return (PAIRING_NAME.get(p.pairing, HOST_PAIRING), str(q.batch_size), str(p.steps),
            _impl(q.llama_impl, q.llama_execution), _impl(q.llada_impl, q.llada_execution),
            f"{q.llama_latency_s:.3g} s / {q.llada_latency_s:.3g} s",
            f"**{q.speedup:.3g}x** {bracket(q.speedup_low, q.speedup_high)}",
            f"{q.sessions} × {q.llama_repetitions} + {q.llada_repetitions}; {q.interval_label.split(',')[0]}",
            f"`{sweep}`")  # fmt: skip


def _speedup(q: PairingPoint) -> Speedup:
    return Speedup(q.speedup, q.speedup_low, q.speedup_high, q.interval_level, q.interval_method, q.sessions,
                   (q.llama_repetitions, q.llada_repetitions))


def b_star_lines(findings: Sequence[tuple[str, FindingsFile]]) -> list[str]:
    """The fast pairing's B* over every batch measured in several sessions, across the folder's sweeps."""
    points: dict[tuple[int, int, int], dict[int, PairingPoint]] = {}
    for _, record in findings:
        for p in record.findings:
            if p.pairing == BEST_PAIRING:
                for q in p.speedups:
                    if q.sessions > 1:
                        points.setdefault((p.prompt_length, p.generation_length, p.steps), {})[q.batch_size] = q
    lines = []
    for (prompt, generation, steps), by_batch in sorted(points.items()):
        if len(by_batch) < 2:
            continue
        batches = sorted(by_batch)
        c = crossover(batches, [_speedup(by_batch[b]) for b in batches])
        lines.append(f"B\\* of the fast pairing (P = {prompt}, N_out = {generation}, K = {steps}; batches "
                     f"{', '.join(map(str, batches))}): {crossover_text(c, 'LLaMA', 'LLaDA')}")
    return lines


def extrapolation_check(result: RunResult, timed: int = CHECK_TIMED_STEPS) -> tuple[float, float] | None:
    """(what campaign-h100's rule gives from the run's own first `timed` steps, its measured median latency): each
    repetition's latency less its steps after the first `timed`, plus their mean for each of those steps."""
    samples = result.samples
    if samples is None or not samples.step_s or samples.extrapolated is not None:
        return None
    ruled = [e2e - sum(steps[timed:]) + (len(steps) - timed) * statistics.fmean(steps[:timed])
             for e2e, steps in zip(samples.latency_e2e_s, samples.step_s) if len(steps) > timed]
    return (statistics.median(ruled), statistics.median(samples.latency_e2e_s)) if ruled else None


def not_interleaved(results: Sequence[RunResult]) -> str | None:
    """Why the runs were not interleaved point by point (None: they were): in each session, in the order they ran,
    every batch's runs come one after another, and hold both models."""
    sessions: dict[int, list[RunResult]] = {}
    for r in results:
        sessions.setdefault(r.config.session or 0, []).append(r)
    for session, runs in sorted(sessions.items()):
        order = [(r.config.batch_size, r.config.prompt_length, r.config.generation_length)
                 for r in sorted(runs, key=lambda r: r.started_at)]  # fmt: skip
        for point in dict.fromkeys(order):
            first, last = order.index(point), len(order) - 1 - order[::-1].index(point)
            if order[first:last + 1] != [point] * (last - first + 1):
                return f"in session {session} the runs at B = {point[0]} were split by other points' runs"
            sides = {family(r.config.model.arch).is_diffusion for r in runs
                     if (r.config.batch_size, r.config.prompt_length, r.config.generation_length) == point}
            if len(sides) < 2:
                return f"in session {session} only one model ran at B = {point[0]}"
    return None


def provenance(results: Sequence[RunResult], record: HeadlineSweepRecord | None) -> list[str]:
    """What a reader checks before the numbers, read from the runs: commit, device, sessions x repetitions,
    warm-ups, interleaving, extrapolation, and the graph tests' gate."""
    commits = sorted({(r.environment.git_commit or "unknown")[:12] for r in results if r.environment})
    devices = sorted({r.environment.device for r in results if r.environment})
    controls = {(r.config.controls.sessions, r.config.controls.warmup, r.config.controls.repetitions) for r in results}
    interleave = not_interleaved(results)
    extrapolated = sum(1 for r in results if r.samples is not None and r.samples.extrapolated is not None)
    started = sorted(r.started_at for r in results)
    runs = "; ".join(f"{s} session{'s' if s > 1 else ''} × {n} repetitions, {w} warm-up{'s' if w != 1 else ''} per run"
                     for s, w, n in sorted(controls))
    lines = [(f"commit {', '.join(commits)} (every run's environment); {', '.join(devices)}; "
              f"{started[0][:16]} to {started[-1][:16]} UTC"),
             f"{runs}, each session a fresh process (on a GPU, a fresh CUDA context)",
             "interleaved: " + ("yes: in every session, each batch's runs of both models one after another, in an "
                                "order drawn from the seed" if interleave is None else f"no: {interleave}"),
             "no extrapolation: every latency is a full run" if not extrapolated
             else f"{extrapolated} run(s) extrapolated from their first steps"]  # fmt: skip
    gate = record.graph_gate if record is not None else None
    if gate is not None:
        passed = sum(1 for outcome in gate.tests.values() if outcome == "passed")
        lines.append(f"graph rows: left out, {gate.reason}" if gate.reason
                     else f"graph rows: admitted by {gate.piece} ({passed} of {len(gate.tests)} tests passed)")
    return lines


def admitted(folder: Path, *, readme: bool) -> tuple[list[Path], RoundRecord]:
    """The folder's sweeps and its round.json, each sweep one the record names as its runs say (for the README:
    a GPU round's at the 8B shapes); HeadlineError (one line) otherwise."""
    sweeps = _sweeps(folder)
    if not sweeps:
        raise HeadlineError(f"{folder}: holds no sweep; import a round's export (just headline-results EXPORT)")
    try:
        record = read_round_record(folder / RECORD_FILE)
    except RoundRecordError as exc:
        raise HeadlineError(str(exc)) from None
    for sweep in sweeps:
        refusal = headline_refusal(sweep.name, record.sweeps.get(sweep.name), load_results(SweepLayout(sweep)),
                                   readme=readme)
        if refusal is not None:
            raise HeadlineError(f"{folder}/{refusal}")
    return sweeps, record


def render_folder(folder: Path) -> str:
    """One GPU's headline: the table over every sweep in `folder`, B* across them, the B = 64 extrapolation
    check, and each sweep's provenance."""
    sweeps, record = admitted(folder, readme=False)
    records = record.sweeps
    findings = [(s.name, _findings(s)) for s in sweeps]
    rows = [_row(p, q, name) for name, record in findings for p in record.findings
            for q in p.speedups]  # fmt: skip
    order = [PAIRING_NAME[BEST_PAIRING], PAIRING_NAME[AR_BEST_PAIRING], HOST_PAIRING]
    rows.sort(key=lambda r: (order.index(r[0]), int(r[1]), int(r[2])))
    header = ("pairing", "B", "K", "LLaMA-3-8B", "LLaDA-8B", "L_e2e LLaMA / LLaDA", "speedup [interval]",
              "sessions × repetitions", "sweep")
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [""] + [f"- {line}" for line in b_star_lines(findings)]
    for sweep in sweeps:
        results = load_results(SweepLayout(sweep))
        for r in results:
            check = extrapolation_check(r) if r.config.batch_size >= 64 and r.config.steps else None
            if check is not None:
                lines.append(f"- B = {r.config.batch_size}, {r.config.impl_name}, K = {r.config.steps}, in full: "
                             f"{check[1]:.3g} s measured; campaign-h100's rule (the first {CHECK_TIMED_STEPS} steps' "
                             f"mean for every later step) would give {check[0]:.3g} s ({check[0] / check[1]:.2f}x)")
        lines.append(f"- `{sweep.name}`: " + "; ".join(provenance(results, records.get(sweep.name))))
    every = [r for sweep in sweeps for r in load_results(SweepLayout(sweep))]
    devices = ", ".join(sorted({r.environment.device for r in every if r.environment}))
    shapes = _models_title(every)
    title = (f"**The 8B headline, measured on {devices}** (`{folder.parent.parent.name}/{folder.parent.name}/"
             f"{folder.name}/`; {shapes}; speedup = L_e2e(LLaMA) / L_e2e(LLaDA) at the same batch and lengths, "
             "> 1: LLaDA faster; each interval as the report computes it)")
    return "\n".join([title, "", *lines]) + "\n"


def _models_title(results: Sequence[RunResult]) -> str:
    """What the models are, as the title says it: the 8B shapes (random weights, or the published checkpoints),
    else each model as round.json names it."""
    models = models_of(results)
    if models != EIGHT_B:
        return f"models {models}"
    synthetic = all(not isinstance(r.config.model.source, CheckpointSource) for r in results)
    return "LLaMA-3-8B's and LLaDA-8B's shapes, " + ("random weights" if synthetic else "their published checkpoints")


def fill_block(text: str, block: str, where: str) -> str:
    """`text` with everything between HEADLINE_BEGIN and HEADLINE_END replaced by `block`."""
    if text.count(HEADLINE_BEGIN) != 1 or text.count(HEADLINE_END) != 1 or text.index(HEADLINE_BEGIN) > text.index(HEADLINE_END):
        raise HeadlineError(f"{where}: needs one '{HEADLINE_BEGIN}' line before one '{HEADLINE_END}' line")
    head, rest = text.split(HEADLINE_BEGIN)
    _, tail = rest.split(HEADLINE_END)
    return f"{head}{HEADLINE_BEGIN}\n{block}{HEADLINE_END}{tail}"


def render(results: Path, readme: Path | None) -> list[Path]:
    """Every `results/*/headline/` into its headline.md, and all of them, in order, into the README's block."""
    if readme is not None and not readme.is_file():
        raise HeadlineError(f"--readme {readme}: no such file; give the README whose headline block to fill "
                            "(README.md)")
    folders = sorted(f for f in results.glob("*/headline") if f.is_dir())
    if readme is not None:  # every sweep admitted before anything is written
        for folder in folders:
            admitted(folder, readme=True)
    blocks = []
    for folder in folders:
        text = render_folder(folder)
        atomic_write(folder / HEADLINE_FILE, text.encode("utf-8"))
        blocks.append(text)
    if readme is not None:
        new = fill_block(readme.read_text(encoding="utf-8"), "\n".join(blocks), str(readme))
        atomic_write(readme, new.encode("utf-8"))
    return [f / HEADLINE_FILE for f in folders]


def main(argv: list[str] | None = None) -> int:
    parser: argparse.ArgumentParser = OneLineParser(prog="report.answer.headline", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder (results)")
    parser.add_argument("--readme", type=Path, help="fill this README's headline block")
    args = parser.parse_args(argv)
    try:
        for path in render(args.results, args.readme):
            print(f"headline in {path}")
    except HeadlineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
