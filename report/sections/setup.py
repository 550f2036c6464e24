"""Section 2, Setup and controls: the models, the grid, the controls, the runs by status and the frozen spec."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from report.analysis import stats
from report.analysis.departures import departures, summary
from report.document.content import Block, Paragraph, Preformatted, Table
from report.sections.cells import column_table, key_columns, simple
from report.sections.inputs import Blocks, ReportInputs
from report.table.flat import UNKNOWN_HARDWARE
from report.table.sessions import DISTURBED_CPU_SHARE, session_load_rows
from specs.registry import family
from specs.schema import ExperimentSpec


SESSIONS_CAPTION = ("Sessions: whether the machine was quiet while each ran. CPU time / wall time: the process's CPU "
                    "time over its measured repetitions' wall time times its torch threads (below "
                    f"{DISTURBED_CPU_SHARE:.0%} the runs waited for a core); load: the machine's 1-minute load "
                    "average at the runs' start and end, against the CPUs the worker could use (above them, runnable "
                    "tasks waited). Either sign flags the session as disturbed. CPU-timed runs only: on a GPU the "
                    "host's CPU time is not the device's.")


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    blocks: list[Block] = []
    if inputs.problems:
        blocks.append(Paragraph(
            "These artifacts FAILED verification and were rendered only because --allow-unverified was given: "
            + "; ".join(inputs.problems), warning=True))
    spec, table = inputs.spec, inputs.table
    blocks += departures_blocks(inputs)
    if spec is not None and spec.description:
        blocks.append(Paragraph(spec.description))
    if spec is not None and (elsewhere := _elsewhere(spec, table)):
        blocks.append(Paragraph(elsewhere, warning=True))
    models = table.select("model", "arch", "weights").unique().sort(["arch", "model"])
    blocks.append(Table(("model", "arch", "weights", "source"), tuple(
        (m, a, w, _source(spec, m)) for m, a, w in models.iter_rows()), "Models"))
    if spec is not None:
        blocks += _spec_blocks(spec)
    counts = table.group_by("hardware", "status").len().sort(["hardware", "status"])
    blocks.append(Table(("hardware", "status", "runs"), tuple((h, s, str(n)) for h, s, n in counts.iter_rows()),
                        "Runs by hardware and status (figures never mix hardware)"))
    if inputs.sessions:
        blocks.append(Table(("session", "CPU-timed runs", "CPU time / wall time", "load (1 min, median)", "flag"),
                            tuple(session_load_rows(inputs.sessions)), SESSIONS_CAPTION))
    failed = table.filter(pl.col("status") != "ok")
    if failed.height:
        columns = [("run", "run_id"), *simple(key_columns(True, failed)), ("status", "status"),
                   ("error", lambda r: (r["error"] or "").splitlines()[0][:160] if r["error"] else "–")]
        blocks.append(column_table(failed, columns, "Runs that did not succeed"))
    if table.filter(pl.col("hardware") == UNKNOWN_HARDWARE).height:
        blocks.append(Paragraph("Runs without an environment record (hardware 'unknown') appear in the tables "
                                "only, never in a figure."))
    if inputs.spec_text is not None:
        blocks.append(Preformatted(inputs.spec_text, "The frozen spec (spec.yaml)"))
    return Blocks(blocks, [])


def _spec_blocks(spec: ExperimentSpec) -> list[Block]:
    """The grid and the controls, with a warning where too few repetitions make every interval a range."""
    c = spec.controls
    blocks: list[Block] = [_grid_table(spec), Table(("control", "value"), (
        ("dtype", c.dtype), ("attention kernel", c.attention), ("device", c.device),
        ("warm-up passes", str(c.warmup)), ("measured repetitions", str(c.repetitions)),
        ("temperature", f"{c.temperature:g}"), ("seed", str(c.seed)),
        ("hardware requirement", f"gpu={c.hardware.gpu}, exclusive={c.hardware.exclusive}"),
    ), "Controls (identical across runs)")]
    if c.repetitions < stats.MIN_CI_SAMPLES:
        blocks.append(Paragraph(
            f"{c.repetitions} measured repetitions per run (this spec's controls.repetitions): every latency and "
            f"throughput interval below is the range of the {c.repetitions} values, not a confidence interval (a 95% "
            f"interval needs at least {stats.MIN_CI_SAMPLES}).", warning=True))
    return blocks


def departures_blocks(inputs: ReportInputs) -> list[Block]:
    """What opens the setup: the sweep against the study's design, every control, the departures named."""
    rows = departures(inputs.table, inputs.spec, inputs.spec_text, inputs.quality.parity)
    agrees = {True: "yes", False: "NO", None: "not measured"}
    return [Paragraph(summary(rows)), Table(
        ("control", "study (report-draft.md)", "this sweep", "agrees", "why"),
        tuple((r.control.label, f"§{r.control.section}: {r.control.study}", r.sweep, agrees[r.agrees], r.why or "–")
              for r in rows),
        "Departures from the study: each control of its design beside what this sweep's runs recorded", fold=False)]


def _elsewhere(spec: ExperimentSpec, table: pl.DataFrame) -> str | None:
    """A warning when the runs recorded a device other than the one the spec names (controls.hardware)."""
    hardware = spec.controls.hardware
    asked = hardware.gpu.strip()
    devices = sorted(set(table["hardware"].to_list()) - {UNKNOWN_HARDWARE})
    if asked.lower() == "any" or not devices or all(asked.lower() in d.lower() for d in devices):
        return None
    profile = f", roofline profile {hardware.profile}" if hardware.profile else ""
    return (f"The spec names gpu {asked!r}{profile} (controls.hardware), but the runs recorded "
            f"{', '.join(devices)} and measured there (allow_mismatch): every number in this report is that "
            "device's, and the spec's words about the hardware describe the request, not the machine.")


def _source(spec: ExperimentSpec | None, model: str) -> str:
    m = spec.model(model) if spec else None
    if m is None:
        return "–"
    source = m.source
    if hasattr(source, "checkpoint"):
        return f"checkpoint {source.checkpoint}"
    synthetic = source.synthetic
    return f"synthetic {synthetic if isinstance(synthetic, str) else 'custom shape'}"


def _impl_names(impls: Sequence) -> str:
    """'vanilla, dual-cache (cache dual), static-compile (compile)': each implementation with what it changes."""
    def knobs(impl) -> str:
        changed = impl.model_dump(exclude_defaults=True, exclude={"name"})
        return f" ({', '.join(k if v is True else f'{k} {v}' for k, v in changed.items())})" if changed else ""

    return ", ".join(f"{impl.name}{knobs(impl)}" for impl in impls)


def _grid_table(spec: ExperimentSpec) -> Table:
    grid = spec.grid
    pairs = ", ".join(f"{p.prompt}+{p.generation}" for p in grid.length_pairs())
    rows = [("batch sizes", ", ".join(map(str, grid.batch_sizes))), ("prompt + generation lengths", pairs)]
    for model in spec.models:
        axes = spec.llada_axes(model)
        if axes is not None:
            rows += [
                (f"{model.name}: diffusion steps", ", ".join(map(str, axes.steps))),
                (f"{model.name}: block lengths", ", ".join(map(str, axes.block_lengths))),
                (f"{model.name}: remasking", ", ".join(axes.remasking)),
                (f"{model.name}: cfg scales", ", ".join(f"{v:g}" for v in axes.cfg_scales)),
                (f"{model.name}: implementations", _impl_names(axes.impl)),
            ]
        elif (dream := spec.dream_axes(model)) is not None:
            rows += [
                (f"{model.name}: diffusion steps", ", ".join(map(str, dream.steps))),
                (f"{model.name}: algs", ", ".join(dream.algs)),
                *[(f"{model.name}: {name}", f"{value:g}") for name, value in
                  (("alg_temp", dream.alg_temp), ("top_p", dream.top_p), ("top_k", dream.top_k)) if value is not None],
                (f"{model.name}: implementations", _impl_names(dream.impl)),
            ]
        elif spec.grid.llama is not None and not family(model.arch).is_diffusion:
            rows.append((f"{model.name}: implementations", _impl_names(spec.grid.llama.impl)))
    rows.append(("prompts", f"{spec.prompts.count} from {spec.prompts.dataset}"))
    return Table(("axis", "values"), tuple(rows), "Grid")
