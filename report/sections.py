"""The report's sections in the study's order, built from the flat table, the figures and the manifest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from report import stats
from report.document import (
    Document,
    FigureBlock,
    Paragraph,
    Preformatted,
    Section,
    Table,
    fmt_bytes,
    fmt_float,
    fmt_rate,
    fmt_seconds,
    fmt_value,
)
from report.energy import energy_blocks
from report.extrapolation import extrapolated_share, extrapolation_checks
from report.findings import CROSSOVER_ANCHOR, PARITY_ANCHOR
from report.pairings import Pairing, pairing_blocks
from report.quality import FIGURE_METRICS, QualityData
from report.table import (
    UNKNOWN_HARDWARE,
    USEFUL_FRACTION_FLAG,
    has_variants,
    provenance_notes,
    quality_notes,
    unlearned_warnings,
    vanilla_runs,
)
from report.variants import DELTA_METRICS, UNPAIRED, idle_confidence_rules, payoff_table
from specs.artifacts import Manifest
from specs.schema import ExperimentSpec

SECTIONS = (
    ("findings", "1. Findings"),
    ("setup", "2. Setup and controls"),
    ("latency", "3. Latency"),
    ("throughput", "4. Throughput"),
    ("memory", "5. Memory"),
    ("quality", "6. Quality vs computation"),
    ("variants", "7. Accelerated variants"),
    ("roofline", "8. Roofline"),
    ("energy", "9. Energy"),
    ("provenance", "10. Environment and provenance"),
)
BERTSCORE_WINDOW_NOTE = (
    "BERTScore scores the whole text: a continuation or reference longer than the scorer's window (510 subword "
    "tokens for BERT-style models) is embedded in consecutive windows and matched as one text."
)


@dataclass(frozen=True)
class ReportInputs:
    sweep: str
    spec_text: str | None
    spec: ExperimentSpec | None
    manifest: Manifest | None
    problems: tuple[str, ...]
    table: pl.DataFrame
    quality: QualityData
    figures: tuple[FigureBlock, ...]
    figure_sections: dict[int, str]  # figure number → section anchor
    predictions: pl.DataFrame  # every hardware's predictions (may be empty)
    roofline_notes: tuple[str, ...]
    findings: pl.DataFrame  # report.findings.FINDINGS_SCHEMA
    crossovers: pl.DataFrame  # report.findings.CROSSOVER_SCHEMA
    variants: pl.DataFrame  # report.variants.VARIANT_SCHEMA (empty without variant runs)
    pairings: tuple[Pairing, ...] = ()  # report.pairings.pairing_table: the answer both ways


def build_document(inputs: ReportInputs) -> Document:
    sections = {anchor: Section(anchor, title) for anchor, title in SECTIONS}
    table = inputs.table
    multi = table.filter(pl.col("hardware") != UNKNOWN_HARDWARE)["hardware"].n_unique() > 1
    _findings(sections["findings"], inputs, multi)
    _setup(sections["setup"], inputs)
    sections["quality"].blocks += [Paragraph(note, warning=True) for note in unlearned_warnings(vanilla_runs(table))]
    sections["quality"].blocks += [
        Paragraph(f"Quality note from the runs: {note}", warning=True) for note in quality_notes(table)
    ]
    sections["roofline"].blocks += [Paragraph(note) for note in inputs.roofline_notes]
    for block in inputs.figures:
        sections[inputs.figure_sections[block.number]].blocks.append(block)
    ok = table.filter(pl.col("status") == "ok")
    sections["latency"].blocks.append(_latency_table(ok, multi))
    sections["latency"].blocks += _extrapolation_blocks(table)
    sections["throughput"].blocks.append(_throughput_table(ok, multi))
    if inputs.crossovers.height:
        sections["throughput"].blocks.append(_crossover_table(inputs.crossovers, multi))
    sections["memory"].blocks.append(_memory_table(table, multi))
    _quality(sections["quality"], inputs, multi)
    _variants(sections["variants"], inputs, multi)
    _roofline(sections["roofline"], inputs)
    sections["energy"].blocks[:0] = energy_blocks(table, multi)  # text and tables before the figure
    _provenance(sections["provenance"], inputs)
    statuses = ", ".join(f"{n} {s}" for s, n in table.group_by("status").len().sort("status").iter_rows())
    subtitle = f"Sweep {inputs.sweep!r}: {table.height} runs ({statuses or 'none'})"
    return Document(f"llada-bench report: {inputs.sweep}", subtitle, list(sections.values()))


def _key_columns(multi: bool) -> list[tuple[str, str]]:
    cols = [("hardware", "hardware")] if multi else []
    return cols + [("model", "model"), ("impl", "impl"), ("batch_size", "B"), ("prompt_length", "P"),
                   ("generation_length", "N_out"), ("steps", "steps"), ("block_length", "block")]


def _rows(df: pl.DataFrame, columns: Sequence[tuple[str, object]]) -> tuple[tuple[str, ...], ...]:
    out = []
    for row in df.iter_rows(named=True):
        out.append(tuple(fmt(row) if callable(fmt) else fmt_value(row[fmt]) for _, fmt in columns))
    return tuple(out)


def _simple(keys: list[tuple[str, str]]) -> list[tuple[str, object]]:
    return [(label, column) for column, label in keys]


# ------------------------------------------------------------------ 1. setup


def _setup(section: Section, inputs: ReportInputs) -> None:
    blocks = section.blocks
    if inputs.problems:
        blocks.append(Paragraph(
            "These artifacts FAILED verification and were rendered only because --allow-unverified was given: "
            + "; ".join(inputs.problems), warning=True))
    spec = inputs.spec
    if spec is not None and spec.description:
        blocks.append(Paragraph(spec.description))
    table = inputs.table
    models = table.select("model", "arch", "weights").unique().sort(["arch", "model"])
    blocks.append(Table(("model", "arch", "weights", "source"), tuple(
        (m, a, w, _source(spec, m)) for m, a, w in models.iter_rows()), "Models"))
    if spec is not None:
        blocks.append(_grid_table(spec))
        c = spec.controls
        blocks.append(Table(("control", "value"), (
            ("dtype", c.dtype), ("attention kernel", c.attention), ("device", c.device),
            ("warm-up passes", str(c.warmup)), ("measured repetitions", str(c.repetitions)),
            ("temperature", f"{c.temperature:g}"), ("seed", str(c.seed)),
            ("hardware requirement", f"gpu={c.hardware.gpu}, exclusive={c.hardware.exclusive}"),
        ), "Controls (identical across runs)"))
        if c.repetitions < stats.MIN_CI_SAMPLES:
            blocks.append(Paragraph(
                f"{c.repetitions} measured repetitions per run: every latency and throughput interval below is "
                f"the range of the {c.repetitions} values, not a confidence interval (a 95% interval needs at least "
                f"{stats.MIN_CI_SAMPLES}; the GPU specs measure 10).", warning=True))
    counts = table.group_by("hardware", "status").len().sort(["hardware", "status"])
    blocks.append(Table(("hardware", "status", "runs"), tuple((h, s, str(n)) for h, s, n in counts.iter_rows()),
                        "Runs by hardware and status (figures never mix hardware)"))
    failed = table.filter(pl.col("status") != "ok")
    if failed.height:
        columns = [("run", "run_id"), *_simple(_key_columns(True)), ("status", "status"),
                   ("error", lambda r: (r["error"] or "").splitlines()[0][:160] if r["error"] else "–")]
        blocks.append(Table(tuple(c for c, _ in columns), _rows(failed, columns), "Runs that did not succeed"))
    if table.filter(pl.col("hardware") == UNKNOWN_HARDWARE).height:
        blocks.append(Paragraph("Runs without an environment record (hardware 'unknown') appear in the tables "
                                "only, never in a figure."))
    if inputs.spec_text is not None:
        blocks.append(Preformatted(inputs.spec_text, "The frozen spec (spec.yaml)"))


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
        elif spec.grid.llama is not None:
            rows.append((f"{model.name}: implementations", _impl_names(spec.grid.llama.impl)))
    rows.append(("prompts", f"{spec.prompts.count} from {spec.prompts.dataset}"))
    return Table(("axis", "values"), tuple(rows), "Grid")


# ------------------------------------------------------------------ 1. findings


def _findings(section: Section, inputs: ReportInputs, multi: bool) -> None:
    """One table (each number links to the table it comes from) and, in the figures, one figure."""
    findings = inputs.findings
    if not findings.height:
        section.blocks.append(Paragraph("No finding: the sweep has no successful runs of both models at the same "
                                        "lengths."))
        return
    columns = (["hardware"] if multi else []) + ["N_out", "finding", "value"]
    rows, links = [], []
    for r in findings.iter_rows(named=True):
        rows.append(tuple(([r["hardware"]] if multi else []) + [str(r["generation_length"]), r["finding"], r["value"]]))
        links.append(tuple(([None] if multi else []) + [None, None, r["source"]]))
    judge = _judge_note(inputs.quality)
    caption = ("The answer: S_parity (the fewest diffusion steps from which LLaDA matches the named LLaMA reference "
               "at every larger step) with its bootstrap interval over prompts; the speedup L_e2e(LLaMA) / "
               "L_e2e(LLaDA at S_parity) at every batch size, conditional on S_parity, with goodput (tokens before "
               "the first EOS); and B*, the batch size from which LLaMA's throughput stays ahead of LLaDA's at each "
               "step count, interpolated between measured batch sizes, beside the roofline's B* for the same device")
    section.blocks.append(Table(tuple(columns), tuple(rows), caption, fold=False, links=tuple(links)))
    section.blocks += pairing_blocks(inputs.pairings, multi)
    if judge:
        section.blocks.append(Paragraph(judge))


def _judge_note(quality: QualityData) -> str | None:
    """The judge's bias, in numbers: LLaMA greedy vs the human text under the LLaMA evaluator."""
    setting = quality.by_setting.filter((pl.col("metric") == "gen_ppl") & (pl.col("arch") == "llama"))
    human = quality.calibration.filter((pl.col("metric") == "gen_ppl") & (pl.col("text") == "human continuation"))
    if not setting.height:
        return None
    greedy = setting.filter((pl.col("continuation") == "generated") & (pl.col("temperature") == 0))
    parts = []
    if greedy.height:
        parts.append(f"LLaMA's greedy text scores a median perplexity of {fmt_float(greedy['value'][0])}")
    if human.height:
        parts.append(f"the human continuation {fmt_float(human['value'][0])}")
    judge = setting["model"][0]
    return (f"Perplexity is judged by {judge}, the LLaMA under test: its greedy text is its own mode ("
            + ", ".join(parts) + "), so a perplexity headline against LLaMA greedy would favour the judge. The "
            "headline for perplexity is LLaMA sampled (else the human continuation's level); LLaMA greedy stays as "
            "a second row, and the repeated-bigram rate stands beside every perplexity, since repetitive text also "
            "scores a low perplexity.")


# ------------------------------------------------------------------ 3-5. latency, throughput, memory


def _interval_cell(row: dict, name: str, fmt) -> str:
    """'[low, high] (range, n=5)' or '[low, high] (95% BCa CI, n=10)': never an interval without its kind."""
    low, high, kind, n = row[f"{name}_interval_low"], row[f"{name}_interval_high"], row[f"{name}_interval"], row[f"{name}_n"]
    if low is None or high is None or kind is None:
        return "–"
    return f"[{fmt(low)}, {fmt(high)}] ({stats.INTERVAL_LABEL[kind]}, n={n})"


def _mean_sd(row: dict, name: str, fmt) -> str:
    if row[f"{name}_mean"] is None:
        return "–"
    sd = row[f"{name}_sd"]
    return f"{fmt(row[f'{name}_mean'])} ± {fmt(sd)}" if sd is not None else fmt(row[f"{name}_mean"])


def _tails(row: dict, name: str) -> str:
    values = [row[f"{name}_p{p}"] for p in stats.TAIL_PERCENTILES]
    return "–" if values[0] is None else " / ".join(fmt_seconds(v) for v in values)


def _latency_table(ok: pl.DataFrame, multi: bool) -> Table:
    columns = [
        *_simple(_key_columns(multi)),
        ("latency median", lambda r: fmt_seconds(r["latency_e2e_s_median"])),
        ("interval of the median", lambda r: _interval_cell(r, "latency_e2e_s", fmt_seconds)),
        ("mean ± sd", lambda r: _mean_sd(r, "latency_e2e_s", fmt_seconds)),
        ("CV", lambda r: fmt_float(r["latency_e2e_s_cv"], 2)),
        ("TTFT", lambda r: fmt_seconds(r["ttft_s_median"])),
        ("ITL (study)", lambda r: fmt_seconds(r["itl_s_median"])),
        ("decode pass p50 / p90 / p99", lambda r: _tails(r, "itl_token_s")),
        ("step p50 / p90 / p99", lambda r: _tails(r, "step_s")),
        ("reps", lambda r: str(r["latency_e2e_s_n"])),
        ("timed", _timed_cell),
        ("compile (untimed)", lambda r: fmt_seconds(r["compile_s"])),
        ("roofline efficiency", _efficiency_cell),
    ]
    return Table(tuple(c for c, _ in columns), _rows(ok, columns),
                 "Latency per run: median over repetitions with the interval of the median (a 95% BCa bootstrap CI "
                 f"from {stats.MIN_CI_SAMPLES} repetitions up, else the range), mean ± sd and CV. ITL (study) is "
                 "(L_e2e - TTFT) / (N_out - 1), the study's definition (3.1.1); the decode-pass and step percentiles "
                 "are over every timed pass of every repetition; compile: torch.compile time spent in the warm-ups "
                 "of a compiled variant, never in the latency; roofline efficiency: the roofs-only predicted "
                 "latency / the measured median (1 = at the roof; 'VIOLATED': faster than 0.9x the roofs allow)")


def _efficiency_cell(row: dict) -> str:
    value = row.get("roofline_efficiency")
    if value is None:
        return "–"
    return fmt_float(value, 2) + (" VIOLATED" if row.get("roofline_violated") else "")


def _timed_cell(row: dict) -> str:
    """Which steps the latency rests on: all of them, or the first K with the rest extrapolated."""
    if row.get("extrapolated"):
        return f"first {row['timed_steps']} of {row['steps']} steps, extrapolated"
    return "in full"


def _extrapolation_blocks(table: pl.DataFrame) -> list[Paragraph | Table]:
    """Say how many latencies are extrapolated, and set each check point's extrapolation beside its full run."""
    extrapolated, _ = extrapolated_share(table.filter(pl.col("status") == "ok"))
    if not extrapolated:
        return []
    checks = extrapolation_checks(table)
    blocks: list[Paragraph | Table] = [Paragraph(
        f"{extrapolated} LLaDA run(s) timed only their first steps and extrapolated the rest from the mean timed step "
        "(controls.extrapolation; column 'timed'). Where a point also ran in full, the full measurement is the one "
        "every figure, the Findings and the throughput tables use." + (
            "" if checks.height else " The sweep has no check point that ran both ways, so the extrapolation is "
            "unchecked."))]
    if checks.height:
        columns = [
            ("model", "model"), ("B", "batch_size"), ("P", "prompt_length"), ("N_out", "generation_length"),
            ("steps", "steps"), ("timed steps", "timed_steps"),
            ("extrapolated median", lambda r: fmt_seconds(r["extrapolated_median_s"])),
            ("full median", lambda r: fmt_seconds(r["full_median_s"])),
            ("extrapolated / full", lambda r: fmt_float(r["ratio"], 3)),
            ("reps (extrapolated, full)", lambda r: f"{r['extrapolated_n']}, {r['full_n']}"),
        ]
        blocks.append(Table(tuple(c for c, _ in columns), _rows(checks, columns),
                            "Extrapolation check: the same configuration timed from its first steps and in full; "
                            "a ratio near 1 means the first steps stand for the whole generation"))
    return blocks


def _throughput_table(ok: pl.DataFrame, multi: bool) -> Table:
    columns = [
        *_simple(_key_columns(multi)),
        ("tokens/s median", lambda r: fmt_rate(r["tokens_per_s_median"])),
        ("interval", lambda r: _interval_cell(r, "tokens_per_s", fmt_rate)),
        ("timed", _timed_cell),
        ("goodput tokens/s", lambda r: fmt_rate(r["goodput_tokens_per_s_median"])),
        ("useful / N_out", lambda r: fmt_float(r["useful_fraction"], 3)
         + (" FLAG" if r["low_useful"] else "")),
        ("forwards", lambda r: fmt_float(r["forwards"], 4)),
        ("tokens per forward", lambda r: fmt_float(r["tokens_per_forward"], 3)),
    ]
    return Table(tuple(c for c, _ in columns), _rows(ok, columns),
                 "Throughput per run: B x N_out / latency, and goodput B x useful tokens / latency (useful: tokens "
                 f"before the first EOS; FLAG below {USEFUL_FRACTION_FLAG:.0%} of N_out). Tokens per forward: N_out "
                 "over model forward passes per sequence (LLaMA 1; a CFG step counts two); forwards: the median over "
                 "repetitions where a variant's confidence rule made them vary, else the schedule's count")


def _crossover_table(crossovers: pl.DataFrame, multi: bool) -> Table:
    def measured(r: dict) -> str:
        bound = {"<=": "<= ", ">": "> "}.get(r["b_star_bound"], "")
        return f"{bound}{r['b_star']:.3g}"

    def predicted(column: str):
        return lambda r: "–" if r["profile"] is None else ("> 4096" if r[column] is None else f"{r[column]:.3g}")

    columns = [*([("hardware", "hardware")] if multi else []), ("P", "prompt_length"), ("N_out", "generation_length"),
               ("LLaDA", "llada_model"), ("steps", "steps"), ("block", "block_length"), ("batch sizes", "batch_sizes"),
               ("T(LLaMA) / T(LLaDA)", "throughput_ratios"), ("B* measured", measured),
               ("B* roofline", predicted("predicted_b_star")),
               ("B* roofline, roofs alone", predicted("predicted_b_star_roofs")), ("profile", "profile")]
    return Table(tuple(c for c, _ in columns), _rows(crossovers, columns),
                 "Crossover: the batch size B* from which LLaMA's throughput stays ahead of LLaDA's at each step "
                 "count, interpolated in log B between measured batch sizes ('<=': LLaMA ahead at every batch "
                 "measured, '>': LLaDA ahead at every one), and the faithful roofline's B* on the device's profile",
                 fold=False, anchor=CROSSOVER_ANCHOR)


def _memory_table(table: pl.DataFrame, multi: bool) -> Table:
    rows = table.filter(pl.col("status").is_in(["ok", "oom"]))
    columns = [
        *_simple(_key_columns(multi)), ("status", "status"),
        ("peak allocated", lambda r: fmt_bytes(r["peak_allocated_bytes"])),
        ("peak reserved", lambda r: fmt_bytes(r["peak_reserved_bytes"])),
        ("RSS growth", lambda r: fmt_bytes(r["peak_rss_delta_bytes"])),
        ("weights", lambda r: fmt_bytes(r["weights_bytes"])),
        ("held at OOM", lambda r: fmt_bytes(r["at_failure_allocated_bytes"])),
        ("KV cache", lambda r: fmt_bytes(r["cache_bytes"])),
    ]
    return Table(tuple(c for c, _ in columns), _rows(rows, columns),
                 "Peak memory per run; KV cache: the peak bytes a variant's cache held (LLaDA's prefix or dual "
                 "cache; '–' where the run reports none)")


# ------------------------------------------------------------------ 6. quality


def _quality(section: Section, inputs: ReportInputs, multi: bool) -> None:
    quality = inputs.quality
    provenance = provenance_notes(inputs.table)
    if provenance:
        section.blocks.append(Paragraph("Models: " + " ".join(provenance)))
    judge = _judge_note(quality)
    if judge:
        section.blocks.append(Paragraph(judge))
    section.blocks += _parity_tables(quality.parity, multi, provenance)
    if quality.calibration.height:
        section.blocks.append(_calibration_table(quality.calibration, multi))
    setting = quality.by_setting
    if setting.height:
        columns = [("hardware", "hardware")] if multi else []
        columns += [("model", "model"), ("P", "prompt_length"), ("N_out", "generation_length"), ("steps", "steps"),
                    ("block", "block_length"), ("continuation", "continuation"), ("metric", "metric"),
                    ("median", lambda r: fmt_float(r["value"], 4)),
                    ("interval", lambda r: f"[{fmt_float(r['interval_low'], 4)}, {fmt_float(r['interval_high'], 4)}] "
                     f"({r['interval']})"),
                    ("repeated-bigram rate", lambda r: fmt_float(r["repetition"], 3)),
                    ("ranked worst", lambda r: str(r["empty"])), ("B", "batch_size")]
        section.blocks.append(Table(
            tuple(c for c, _ in columns), _rows(setting, columns),
            "Quality per setting at its smallest batch size: median over prompts with its interval; the "
            "repeated-bigram rate of the same texts beside every perplexity; 'ranked worst' counts continuations "
            "too short for the metric (an empty text has no perplexity), which rank worst instead of leaving their "
            "prompt out. " + BERTSCORE_WINDOW_NOTE + _flag(setting)))
        if quality.elbo_precision.height:
            section.blocks.append(_elbo_table(quality.elbo_precision, multi))
    else:
        section.blocks.append(Paragraph("No run recorded quality metrics."))


def _ci(row: dict, value: str, low: str, high: str, digits: int = 4) -> str:
    if row[value] is None:
        return "–"
    text = fmt_float(row[value], digits)
    if row[low] is None and row[high] is None:
        return text
    return f"{text} [{fmt_float(row[low], digits)}, {fmt_float(row[high], digits) if row[high] is not None else '>'}]"


def _flag(rows: pl.DataFrame) -> str:
    """The runs' quality notes (e.g. synthetic weights) on the table itself, so it is never read without them."""
    notes = sorted({p.strip() for n in rows["quality_note"].drop_nulls().to_list() for p in n.split(";") if p.strip()})
    return f". {'; '.join(notes).capitalize()}." if notes else ""


def _s_parity_cell(r: dict) -> str:
    s = r["s_parity_steps"]
    if s is None:
        text = "none"
    else:
        text = f"{'<= ' if r['s_parity_bound'] == '<=' else ''}{s}"
    if r["parity_fraction"] is None:
        return text
    largest = r["steps_swept"].split(", ")[-1]
    low = r["s_parity_low_steps"]
    high = r["s_parity_high_steps"]
    low_text = str(low) if low is not None else f">{largest}"
    high_text = str(high) if high is not None else f">{largest}"
    return f"{text} [{low_text}, {high_text}]; {r['parity_fraction']:.0%} reach parity"


def _speedup_cell(r: dict) -> str:
    if r["speedup"] is None:
        return "–"
    bound = ">= " if r["s_parity_bound"] == "<=" else ""
    return f"{bound}{r['speedup']:.3g} [{r['speedup_low']:.3g}, {r['speedup_high']:.3g}]"


def _repetition_cell(r: dict) -> str:
    if r["reference_repetition"] is None:
        return "–"
    return f"{fmt_float(r['llada_repetition_at_parity'], 3)} vs {fmt_float(r['reference_repetition'], 3)}"


def _parity_tables(parity: pl.DataFrame, multi: bool, provenance: Sequence[str]) -> list[Table]:
    """The headline parity rows (S_parity, speedup at every batch size) and every parity row."""
    if not parity.height:
        return []
    hw = [("hardware", "hardware")] if multi else []
    models = (" Models: " + " ".join(provenance)) if provenance else ""
    common = [*hw, ("metric", "metric_label"), ("P", "prompt_length"), ("N_out", "generation_length"),
              ("block", "block_length"), ("LLaDA", "llada_model"), ("reference", "reference_label"),
              ("reference level [interval]", lambda r: _ci(r, "reference_value", "reference_interval_low",
                                                           "reference_interval_high")),
              ("S_parity steps [95% CI]; replicates at parity", _s_parity_cell),
              ("repeated-bigram rate at S_parity vs reference", _repetition_cell),
              ("B", "batch_size"), ("speedup [interval | S_parity]", _speedup_cell),
              ("goodput speedup", lambda r: fmt_float(r["goodput_speedup"], 3) + (" FLAG" if r["low_useful"] else "")),
              ("statement", "statement")]
    tables = []
    headline = parity.filter(pl.col("metric").is_in(list(FIGURE_METRICS)) & pl.col("headline"))
    if headline.height:
        tables.append(Table(
            tuple(c for c, _ in common), _rows(headline, common),
            "Steps to quality parity and the speedup at parity at every batch size (speedup > 1: LLaDA is faster "
            "at equal quality). S_parity is found once per generation length, metric and reference, at the "
            "smallest batch size; its 95% CI is a paired bootstrap over prompts. The speedup's interval holds "
            "S_parity fixed (the latency repetitions at that step count); '<=' parity at the fewest swept steps "
            "makes the speedup a lower bound" + _flag(headline) + models,
            fold=False, anchor=PARITY_ANCHOR))
    tables.append(Table(
        tuple(c for c, _ in common), _rows(parity, common),
        "Every parity row: each metric against each reference (LLaMA greedy, LLaMA sampled, and the human "
        "continuation for perplexity and degeneracy)" + _flag(parity) + models))
    return tables


def _calibration_table(calibration: pl.DataFrame, multi: bool) -> Table:
    columns = [*([("hardware", "hardware")] if multi else []), ("metric", "metric_label"), ("P", "prompt_length"),
               ("N_out", "generation_length"), ("scored by", "scored_by"), ("text", "text"),
               ("median", lambda r: fmt_float(r["value"], 4)),
               ("interval", lambda r: f"[{fmt_float(r['interval_low'], 4)}, {fmt_float(r['interval_high'], 4)}] "
                f"({r['interval']})"),
               ("what it means for this metric", "meaning")]
    return Table(tuple(c for c, _ in columns), _rows(calibration, columns),
                 "Calibration: the human continuation and an unrelated passage scored as if generated, read per "
                 "metric (for perplexity and the ELBO the human text is a level, not the best end; for degeneracy "
                 "the unrelated passages are the same texts rotated, so only the human level is shown)")


def _elbo_table(precision: pl.DataFrame, multi: bool) -> Table:
    columns = [*([("hardware", "hardware")] if multi else []), ("LLaDA", "model"), ("N_out", "generation_length"),
               ("Monte-Carlo samples", "samples"), ("prompts", "n_prompts"),
               ("SE per prompt (median)", lambda r: fmt_float(r["stderr_per_prompt"], 3)),
               ("SE share in the median over prompts", lambda r: fmt_float(r["stderr_of_median"], 3)),
               ("smallest difference between adjacent step counts", lambda r: fmt_float(r["smallest_step_difference"], 3)),
               ("small enough", lambda r: "–" if r["small_enough"] is None else ("yes" if r["small_enough"] else
                                                                                   "NO: raise quality.elbo.samples"))]
    return Table(tuple(c for c, _ in columns), _rows(precision, columns),
                 "The ELBO's Monte-Carlo precision next to the differences it is read for (nats/token): its share "
                 "in the median over prompts (1.25 x SE / sqrt(prompts)) should stay under a third of the smallest "
                 "step-to-step difference")


# ------------------------------------------------------------------ 7. variants


def _variants(section: Section, inputs: ReportInputs, multi: bool) -> None:
    """Each variant against vanilla at the same point, then where each stops paying off as the batch grows."""
    variants = inputs.variants
    if not has_variants(inputs.table):
        section.blocks.append(Paragraph("No accelerated variants in this sweep: every run is the vanilla "
                                        "implementation (grid.llada.impl and grid.llama.impl add them)."))
        return
    section.blocks.insert(0, Paragraph(
        "Every other section compares vanilla LLaMA with vanilla LLaDA; this one sets each implementation variant "
        "beside the vanilla run of the same model at the same point (lengths, steps, block, batch)."))
    if not variants.height:
        section.blocks.append(Paragraph("No variant run succeeded.", warning=True))
        return
    hw = [("hardware", "hardware")] if multi else []
    columns = [*hw, ("model", "model"), ("impl", "impl"), ("P", "prompt_length"), ("N_out", "generation_length"),
               ("steps", "steps"), ("block", "block_length"), ("B", "batch_size"),
               ("speedup [interval]", _variant_speedup_cell),
               ("roofline speedup", lambda r: _predicted_cell(r)),
               ("forwards (vanilla → variant)", lambda r: f"{fmt_float(r['vanilla_forwards'], 4)} → "
                f"{fmt_float(r['forwards'], 4)}"),
               ("tokens per forward", lambda r: fmt_float(r["tokens_per_forward"], 3)),
               *((f"Δ {_DELTA_LABEL[m]} [interval]", lambda r, m=m: _delta_cell(r, m)) for m in DELTA_METRICS),
               ("KV cache", lambda r: fmt_bytes(r["cache_bytes"])),
               ("compile (untimed)", lambda r: fmt_seconds(r["compile_s"]))]
    section.blocks.append(Table(
        tuple(c for c, _ in columns), _rows(variants, columns),
        "Each variant against vanilla at the same point. Speedup: vanilla's median end-to-end latency over the "
        f"variant's (> 1: the variant is faster), with a 95% BCa bootstrap CI of the ratio of medians when both "
        f"runs have {stats.MIN_CI_SAMPLES} repetitions, else the range of the ratio; n counts vanilla + variant "
        "repetitions. Roofline speedup: the faithful model on this device's profile (a confidence rule costed at "
        "its measured forwards, else at the step cap). Forwards: per generation (a confidence rule's median over "
        "repetitions). Δ quality: variant minus vanilla per prompt, the median over the prompts both ran with a "
        "percentile bootstrap CI over prompts (the range below six); lower perplexity and higher BERTScore are "
        "better. KV cache: the peak bytes the variant's cache held",
        fold=False, anchor="variants-table"))
    payoff = payoff_table(variants)
    if payoff.height:
        columns = [*hw, ("model", "model"), ("impl", "impl"), ("P", "prompt_length"), ("N_out", "generation_length"),
                   ("steps", "steps"), ("block", "block_length"), ("batch sizes", "batch_sizes"),
                   ("speedup", "speedups"), ("roofline speedup", "predicted_speedups"), ("as batch grows", "statement")]
        section.blocks.append(Table(
            tuple(c for c, _ in columns), _rows(payoff, columns),
            "Where each variant stops paying off as the batch grows: the first measured batch size whose speedup "
            "(point estimate) falls below 1, measured and predicted by the roofline at the same batch sizes",
            fold=False))
    idle = idle_confidence_rules(variants)
    if idle:
        section.blocks.append(Paragraph(
            "The confidence rule of " + ", ".join(idle) + " never ended a block early (as many forwards as vanilla "
            "at every point): no speedup or quality change measured there comes from the rule (a cache it carries "
            "still acts).",
            warning=True))
    missing = variants.filter(pl.col("speedup").is_null())
    if missing.height:
        section.blocks.append(Paragraph(
            f"{missing.height} variant run(s) have no successful vanilla run at the same point, so no speedup or "
            "quality delta: " + ", ".join(sorted(set(missing["run_id"].to_list()))), warning=True))


_DELTA_LABEL = {"gen_ppl": "perplexity", "bertscore_f1": "BERTScore F1"}


def _variant_speedup_cell(r: dict) -> str:
    if r["speedup"] is None:
        return "no vanilla run"
    kind = stats.INTERVAL_LABEL.get(r["speedup_interval"], r["speedup_interval"])
    return (f"{r['speedup']:.3g}x [{r['speedup_low']:.3g}, {r['speedup_high']:.3g}] "
            f"({kind}, n={r['vanilla_repetitions']}+{r['repetitions']})")


def _predicted_cell(r: dict) -> str:
    if r["predicted_speedup"] is None:
        return "–"
    source = f" (forwards: {r['forwards_source']})" if r["forwards_source"] not in (None, "schedule") else ""
    return f"{r['predicted_speedup']:.3g}x{source}"


def _delta_cell(r: dict, metric: str) -> str:
    value = r[f"{metric}_delta"]
    if value is None:
        return "–"
    if r[f"{metric}_delta_interval"] == UNPAIRED:
        return f"{value:+.3g} (unpaired: no shared prompt, difference of medians, no interval)"
    kind = stats.INTERVAL_LABEL.get(r[f"{metric}_delta_interval"], r[f"{metric}_delta_interval"])
    return (f"{value:+.3g} [{r[f'{metric}_delta_low']:+.3g}, {r[f'{metric}_delta_high']:+.3g}] "
            f"({kind}, {r[f'{metric}_pairs']} prompts paired)")


# ------------------------------------------------------------------ 8. roofline


def _roofline(section: Section, inputs: ReportInputs) -> None:
    pred = inputs.predictions.filter(pl.col("predicted_latency_s").is_not_null())
    if not pred.height:
        return
    ratios = (
        pred.with_columns((pl.col("measured_latency_s") / pl.col("predicted_latency_s")).alias("ratio"),
                          (pl.col("measured_latency_s") / pl.col("predicted_latency_roofs_s")).alias("ratio_roofs"))
        .group_by(["hardware", "profile", "fidelity", "model", "impl"])
        .agg(pl.col("ratio").median().alias("median"), pl.col("ratio").min().alias("min"),
             pl.col("ratio").max().alias("max"), pl.col("ratio_roofs").median().alias("roofs_median"),
             pl.col("ratio_roofs").min().alias("roofs_min"), pl.col("ratio_roofs").max().alias("roofs_max"),
             pl.len().alias("runs"), pl.col("roofline_violated").fill_null(False).sum().alias("violated"))
        .sort(["hardware", "fidelity", "model", pl.col("impl") != "vanilla", "impl"])
    )
    section.blocks.append(Table(
        ("hardware", "profile", "fidelity", "model", "impl", "measured / predicted, with floor (median)", "min",
         "max", "measured / predicted, roofs only (median)", "min", "max", "runs", "roofline violated"),
        tuple((h, p, f, m, i, fmt_float(md), fmt_float(lo), fmt_float(hi), fmt_float(rmd), fmt_float(rlo),
               fmt_float(rhi), str(n), str(v))
              for h, p, f, m, i, md, lo, hi, rmd, rlo, rhi, n, v in ratios.iter_rows()),
        "How far each model runs from its roofline on the device that ran (1 = at the roof), with the profile's "
        "floor (the host floor per eager forward, else the per-kernel dispatch floor; none on the study's datasheet "
        "profiles) and on the roofs alone. The roofs alone are a lower bound on time: a run measured faster than "
        "0.9x of it is counted as 'roofline violated'",
        fold=False, anchor="roofline-table",
    ))


# ------------------------------------------------------------------ 9. provenance


def _provenance(section: Section, inputs: ReportInputs) -> None:
    table = inputs.table
    env = table.filter(pl.col("hardware") != UNKNOWN_HARDWARE).group_by(
        "hardware", "device_kind", "dtype", "attention", "torch_version", "cuda_version", "driver", "git_commit",
        "image_digest", "hostname", "other_gpu_processes",
    ).len().sort("hardware")
    section.blocks.append(Table(
        ("hardware", "device", "dtype", "attention", "torch", "CUDA", "driver", "git commit", "image digest", "host",
         "shared GPU", "runs"),
        tuple(tuple(fmt_value(v) for v in row) for row in env.iter_rows()),
        "Environments the runs recorded"))
    if inputs.problems:
        section.blocks.append(Paragraph("Verification FAILED: " + "; ".join(inputs.problems), warning=True))
    else:
        section.blocks.append(Paragraph("Verification passed: every run file and the frozen spec match the "
                                        "manifest's sha256 checksums."))
    manifest = inputs.manifest
    if manifest is None:
        section.blocks.append(Paragraph("No readable manifest.json.", warning=True))
        return
    section.blocks.append(Paragraph(f"spec.yaml sha256: {manifest.spec_sha256}"))
    status = dict(table.select("run_id", "status").iter_rows())
    model = dict(table.select("run_id", "model").iter_rows())
    section.blocks.append(Table(
        ("run file", "model", "status", "sha256"),
        tuple((f"runs/{rid}.json", model.get(rid, "–"), status.get(rid, "missing"), digest)
              for rid, digest in sorted(manifest.runs.items())),
        "Manifest checksums"))
