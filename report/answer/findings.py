"""The answer in one place: per generation length, S_parity on the headline metrics with the speedup at every
batch size measured, and the batch size B* where the autoregressive model's throughput overtakes the diffusion
model's at each step count, per pair (report/answer/pairing/pairs.py: LLaMA against LLaDA, Qwen2.5 against Dream), measured and
interpolated between batch sizes, beside the faithful roofline's B* on the device that ran."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from report.analysis import stats
from report.document.content import fmt_float
from report.analysis.extrapolation import trusted
from report.analysis.intervals import Crossover, crossover, crossover_text
from report.answer.pairing.text import roofline_value
from report.answer.pairing.pairs import is_ar, is_dllm, pair_of, peers_of, sweep_pairs
from report.analysis.parity import bracket, replicate_span
from report.analysis.parity_text import share_text
from report.analysis.quality import FIGURE_METRICS
from report.table.sessions import row_speedup
from report.table.flat import roofline_sampling, vanilla_runs, with_sampler_setting
from roofline.crossover import diffusion_keywords, predicted_crossover
from roofline.hardware import HardwareProfile
from roofline.operators import element_bytes_of
from roofline.predict import predict
from roofline.workload import Workload
from specs.registry import family
from specs.shapes import ModelShape

# Short metric names for the Findings' rows (the linked tables carry the full labels).
SHORT_LABEL = {"bertscore_f1": "BERTScore F1", "gen_ppl": "perplexity"}
# Where the Findings' numbers come from: anchors of the tables they link to.
PARITY_ANCHOR = "parity-table"
CROSSOVER_ANCHOR = "crossover-table"
# The crossover table's column the verdict adds (report/answer/verdict/short.py): whether its vanilla bullet speaks
# of that row, so the findings figure marks the same B*.
VERDICT_COLUMN = "verdict_speaks_of"

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

CROSSOVER_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "prompt_length": _I64, "generation_length": _I64, "llama_model": _STR, "llada_model": _STR,
    "steps": _I64, "block_length": _I64, "batch_sizes": _STR, "throughput_ratios": _STR, "b_star": _F64,
    "b_star_bound": _STR, "b_star_low": _F64, "b_star_low_bound": _STR, "b_star_high": _F64,
    "b_star_high_bound": _STR, "b_star_level": _F64, "b_star_inverted": _I64, "b_star_tokens_per_s": _F64,
    "predicted_b_star": _F64,
    "predicted_b_star_roofs": _F64, "profile": _STR, "calibration": _STR, "sampler_setting": _STR, "ar_title": _STR,
    "dllm_title": _STR, "extrapolated": _STR, "b_star_left_out": pl.List(_STR),
}
PREDICTED_THROUGHPUT_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "prompt_length": _I64, "generation_length": _I64, "arch": _STR, "model": _STR,
    "steps": _I64, "block_length": _I64, "batch_size": _I64, "predicted_tokens_per_s": _F64, "profile": _STR,
    "sampler_setting": _STR, "calibration": _STR,
}
FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "prompt_length": _I64, "generation_length": _I64, "finding": _STR, "value": _STR,
    "source": _STR, "warning": _BOOL,
}


def crossover_table(
    table: pl.DataFrame, profiles: dict[str, HardwareProfile], shapes: dict[str, ModelShape]
) -> pl.DataFrame:
    """One row per pair, hardware, lengths and diffusion setting (step count, block, Dream's alg): the measured B*
    with its interval (report/analysis/intervals.py, from the speedup at each batch) and the faithful roofline's B* on that
    hardware's profile, on the roofs alone and with its calibrated floor (host or dispatch), schema
    CROSSOVER_SCHEMA. Vanilla runs only: B* compares the two paradigms, not their variants. `table`: sessions
    pooled (report.table.sessions.pool_sessions); `shapes`: each arch's shape (report.analysis.predictions.model_shapes)."""
    table = with_sampler_setting(vanilla_runs(table))
    pairs = sweep_pairs(table)
    ok = trusted(table.filter((pl.col("status") == "ok") & pl.col("tokens_per_s_median").is_not_null()))
    autoregressive = ok.filter(is_ar())
    rows = []
    keys = ["hardware", "prompt_length", "generation_length", "model", "steps", "block_length", "remasking",
            "sampler_setting", "cfg_scale", "dtype"]
    for key, runs in ok.filter(is_dllm()).group_by(keys, maintain_order=True):
        hardware, prompt, gen, model, steps, block, _, alg, cfg, dtype = key
        ar = autoregressive.filter((pl.col("hardware") == hardware) & (pl.col("prompt_length") == prompt)
                                   & (pl.col("generation_length") == gen))
        for ar_model in peers_of(pairs, model):
            pair = pair_of(pairs, ar_model, model)
            assert pair is not None, "peers_of names the pairs' models"
            theirs = ar.filter(pl.col("model") == ar_model)
            batches = sorted(set(runs["batch_size"].to_list()) & set(theirs["batch_size"].to_list()))
            if not batches:
                continue
            rows_at = [(theirs.filter(pl.col("batch_size") == b).row(0, named=True),
                        runs.filter(pl.col("batch_size") == b).row(0, named=True)) for b in batches]
            speedups = [row_speedup(a, d) for a, d in rows_at]
            b_star = crossover(batches, speedups)  # None with one batch size
            ratios = [1 / s.estimate for s in speedups]  # T(AR) / T(dLLM): both generate B x N_out tokens
            at_b_star = None if b_star is None else _log_interpolate(
                batches, [a["tokens_per_s_median"] for a, _ in rows_at], b_star.estimate)
            profile = profiles.get(hardware)
            predicted = predicted_roofs = None
            forwards = _median_forwards(runs)
            if profile is not None and not cfg:
                common = {"ar": pair.ar_arch, "diffusion": pair.dllm_arch, "ar_shape": shapes.get(pair.ar_arch),
                          "diffusion_shape": shapes.get(pair.dllm_arch), "prompt_len": prompt, "gen_len": gen,
                          "steps": steps, "block_length": block, "element_bytes": element_bytes_of(dtype),
                          "diffusion_sampling": roofline_sampling(alg, forwards) or None}
                predicted = predicted_crossover(profile, **common)
                predicted_roofs = (predicted_crossover(profile.roofs_only(), **common) if profile.has_floor
                                   else predicted)
            rows.append((hardware, prompt, gen, ar_model, model, steps, block, ", ".join(map(str, batches)),
                         ", ".join(f"{r:.3g}" for r in ratios), *_crossover_columns(b_star), at_b_star,
                         predicted, predicted_roofs, profile.name if profile else None,
                         profile.floor_note() if profile else None, alg, pair.ar_title, pair.dllm_title,
                         extrapolated_batches([d for _, d in rows_at]),
                         list(b_star.left_out) if b_star is not None else []))
    frame = pl.DataFrame(rows, schema=CROSSOVER_SCHEMA, orient="row")
    return frame.sort(["hardware", "generation_length", "prompt_length", "llada_model", "block_length", "steps",
                       "sampler_setting", "llama_model"])


def _median_forwards(runs: pl.DataFrame) -> float | None:
    """The runs' median forwards per generation: what a block-diffusion setting's threshold makes of its schedule
    (None in a frame without them)."""
    return stats.median(runs["forwards"].drop_nulls().to_list()) if "forwards" in runs.columns else None


def _crossover_columns(c: Crossover | None) -> tuple:
    """B* and its interval as crossover_table's columns, b_star to b_star_inverted (nulls: no B* placed)."""
    if c is None:
        return (None,) * 8
    return c.estimate, c.bound, c.low, c.low_bound, c.high, c.high_bound, c.level, c.inverted


def extrapolated_batches(rows: Sequence[dict]) -> str | None:
    """'B = 1, 8 checked; B = 64 UNCHECKED': the batches whose diffusion latency was extrapolated from its first
    timed steps, and whether a full run checked it (None where every latency was measured in full)."""
    scaled = [r for r in rows if r.get("extrapolated")]
    if not scaled:
        return None
    parts = []
    for label, checked in (("checked", True), ("UNCHECKED", False)):
        batches = [str(r["batch_size"]) for r in scaled if (r.get("extrapolation_step_ratio") is not None) == checked]
        if batches:
            parts.append(f"B = {', '.join(batches)} {label}")
    return "; ".join(parts)


def _log_interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """y at x on the log-log line through the measured points around it (the throughput where B* is marked)."""
    return float(np.exp(np.interp(math.log(x), np.log(xs), np.log(ys))))


def predicted_throughput(
    table: pl.DataFrame, profiles: dict[str, HardwareProfile], shapes: dict[str, ModelShape], *, points: int = 12
) -> pl.DataFrame:
    """The faithful roofline's tokens/s of each model setting over the measured batch range (schema
    PREDICTED_THROUGHPUT_SCHEMA): the curves the Findings figure overlays on the measured throughput (vanilla)."""
    ok = with_sampler_setting(vanilla_runs(table)).filter(pl.col("status") == "ok")
    rows = []
    keys = ["hardware", "prompt_length", "generation_length", "arch", "model", "steps", "block_length", "sampler_setting",
            "dtype"]
    for key, runs in ok.filter(pl.col("cfg_scale").is_null() | (pl.col("cfg_scale") == 0)).group_by(
            keys, maintain_order=True):
        hardware, prompt, gen, arch, model, steps, block, alg, dtype = key
        profile = profiles.get(hardware)
        if profile is None:
            continue
        low, high = int(runs["batch_size"].min()), int(runs["batch_size"].max())
        grid = sorted({int(round(b)) for b in np.geomspace(low, high, points)} | {low, high})
        # The diffusion model as the workers run it (roofline.crossover.diffusion_keywords), at its sampler setting.
        forwards = _median_forwards(runs)
        sampler = ({**diffusion_keywords(arch, steps=steps, block_length=block), **roofline_sampling(alg, forwards)}
                   if family(arch).is_diffusion else {})
        for batch in grid:
            work = Workload(prompt_len=prompt, gen_len=gen, batch=batch, element_bytes=element_bytes_of(dtype),
                            **sampler)
            p = predict(arch, shapes.get(arch), work, hardware=profile)
            rows.append((hardware, prompt, gen, arch, model, steps, block, batch, p.tokens_per_s, profile.name, alg,
                         profile.floor_note()))
    return pl.DataFrame(rows, schema=PREDICTED_THROUGHPUT_SCHEMA, orient="row")


# ---------------------------------------------------------------- the Findings table


def findings_table(parity: pl.DataFrame, crossovers: pl.DataFrame, warnings: Iterable[str] = (),
                   unanswered: Iterable[str] = ()) -> pl.DataFrame:
    """The Findings as rows (schema FINDINGS_SCHEMA), per hardware and generation length: S_parity on each
    headline metric against its headline reference, the speedup there at every batch size (with goodput), and
    B* at every step count with the roofline's B* beside it. `warnings` (models that learned nothing beyond
    unigram statistics) come first, on every hardware; each pair without an answer (`unanswered`, with why) last,
    on no particular hardware."""
    rows = []
    grid = sorted(
        set(parity.select("hardware", "prompt_length", "generation_length").iter_rows())
        | set(crossovers.select("hardware", "prompt_length", "generation_length").iter_rows()),
        key=lambda k: (k[0], k[2], k[1]),
    )
    warnings = list(warnings)
    for hardware, prompt, gen in grid:
        rows += [(hardware, prompt, gen, "WARNING", text, None, True) for text in warnings]
        at = parity.filter((pl.col("hardware") == hardware) & (pl.col("prompt_length") == prompt)
                           & (pl.col("generation_length") == gen) & pl.col("headline")
                           & pl.col("metric").is_in(list(FIGURE_METRICS)))
        for (metric, model, block, alg, _), group in with_sampler_setting(at).group_by(
                ["metric", "llada_model", "block_length", "sampler_setting", "llama_model"], maintain_order=True):
            group = group.sort("batch_size")
            first = group.row(0, named=True)
            short = SHORT_LABEL.get(metric, first["metric_label"])
            name = f"S_parity: {model}{f' ({alg})' if alg else ''}, {short} vs {first['reference_label']}"
            rows.append((hardware, prompt, gen, name, _parity_value(first), PARITY_ANCHOR, False))
            for row in group.iter_rows(named=True):
                value, flag = _speedup_value(row)
                rows.append((hardware, prompt, gen, f"speedup at S_parity ({short}), B = {row['batch_size']}",
                             value, PARITY_ANCHOR, flag))
        cross = crossovers.filter((pl.col("hardware") == hardware) & (pl.col("prompt_length") == prompt)
                                  & (pl.col("generation_length") == gen))
        for row in cross.iter_rows(named=True):
            alg = f" ({row['sampler_setting']})" if row["sampler_setting"] else ""
            rows.append((hardware, prompt, gen,
                         f"B*: {row['llama_model']} overtakes {row['llada_model']} at {row['steps']} "
                         + ("step" if row["steps"] == 1 else "steps") + alg,
                         _crossover_value(row), CROSSOVER_ANCHOR, False))
    rows += [(None, None, None, "NO ANSWER", text, None, True) for text in unanswered]
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA, orient="row")


def _parity_value(row: dict) -> str:
    if row.get("decides") is False:
        return f"{row['gate']}; not used for parity"  # the gate's words open with CHANCE
    s = row["s_parity_steps"]
    fraction = row["parity_fraction"]
    reach = (f"{fraction:.0%} of {row['replicates']} bootstrap replicates reach parity" if fraction is not None
             else f"{row['n_prompts']} prompts: no bootstrap")
    largest = row["steps_swept"].split(", ")[-1]
    if row.get("sampler_setting") and largest == row["steps_swept"]:  # one step count: block diffusion's schedule
        reached = "no parity" if s is None else "parity"
        text = f"{reached} at {largest} steps, the one step count it ran ({reach})"
    elif s is None:
        text = f"none within {row['steps_swept']} steps ({reach})"
    else:
        span = (replicate_span(row["s_parity_low_steps"], row["s_parity_high_steps"], largest) + "; "
                if fraction is not None else "")
        text = f"{'<= ' if row['s_parity_bound'] == '<=' else ''}{s} steps ({span}{reach})"
    if row.get("margin") and fraction is not None:
        text += f"; {row['margin']} by a two one-sided test at {row['alpha']:g}; {share_text(row)}"
    if row.get("judge"):
        text += f"; judged by {row['judge']}"
    if row["reference_repetition"] is not None:
        text += (f"; repeated-bigram rate {fmt_float(row['llada_repetition_at_parity'])} at S_parity vs "
                 f"{fmt_float(row['reference_repetition'])} for the reference")
    return text


def _speedup_value(row: dict) -> tuple[str, bool]:
    if row["s_parity_steps"] is None:
        return "no S_parity: no speedup", False
    if row["speedup"] is None:
        return f"{row['llada_model']} at {row['s_parity_steps']} steps did not run at this batch", False
    bound = ">= " if row["s_parity_bound"] == "<=" else ""
    text = f"{bound}{row['speedup']:.3g}x {bracket(row['speedup_low'], row['speedup_high'])} ({row['speedup_interval']})"
    if row["goodput_speedup"] is not None:
        text += f"; goodput {bound}{row['goodput_speedup']:.3g}x"
    if row["low_useful"]:
        text += "; FLAG: under 90% of the tokens come before the first EOS"
    return text, bool(row["low_useful"])


def row_crossover(row: dict) -> Crossover | None:
    """The measured B* of a crossover_table row, with its interval (None: one batch size placed none)."""
    if row["b_star"] is None:
        return None
    left_out = tuple(row.get("b_star_left_out") or ())
    return Crossover(row["b_star"], row["b_star_bound"], row["b_star_low"], row["b_star_low_bound"],
                     row["b_star_high"], row["b_star_high_bound"], row["b_star_level"], row["b_star_inverted"],
                     left_out)


def _crossover_value(row: dict) -> str:
    batches = row["batch_sizes"]
    text = f"{crossover_text(row_crossover(row), row['ar_title'], row['dllm_title'])}, batches {batches}"
    if row.get("extrapolated"):
        text += f" ({row['dllm_title']} EXTRAPOLATED at {row['extrapolated']})"
    if row["profile"] is None:
        return text + "; no roofline profile for this device"
    predicted, roofs = row["predicted_b_star"], row["predicted_b_star_roofs"]
    text += f"; roofline ({row['profile']}): the roofs-only model's B* {roofline_value(roofs)}"
    if row["calibration"] is not None:
        text += f", the floor-calibrated model's {roofline_value(predicted)} ({row['calibration']})"
    return text


def findings_text(findings: pl.DataFrame) -> str:
    """The Findings table as plain text for the terminal: the last thing a sweep prints."""
    if not findings.height:
        return "Findings: none (no autoregressive and diffusion model both ran successfully at the same lengths)"
    multi = findings["hardware"].drop_nulls().n_unique() > 1
    lines = ["Findings"]
    for (hardware, prompt, gen), group in findings.group_by(["hardware", "prompt_length", "generation_length"],
                                                            maintain_order=True):
        lines.append("  the sweep" if gen is None else
                     f"  N_out = {gen} (prompt {prompt})" + (f" on {hardware}" if multi else ""))
        width = max(len(f) for f in group["finding"].to_list())
        for finding, value in group.select("finding", "value").iter_rows():
            lines.append(f"    {finding.ljust(width)}  {value}")
    return "\n".join(lines)


ROOFLINE_ANCHOR = "roofline-table"


def roofline_findings(table: pl.DataFrame) -> pl.DataFrame:
    """Rows of the Findings (FINDINGS_SCHEMA) per hardware and lengths: the median roofline efficiency (roofs-only
    predicted latency / measured) of each model and implementation, and, flagged, every run that violated the
    roofline (measured faster than 0.9x its roofs-only prediction, report/analysis/predictions.py)."""
    if "roofline_efficiency" not in table.columns:
        return pl.DataFrame(schema=FINDINGS_SCHEMA)
    rated = table.filter(pl.col("roofline_efficiency").is_not_null())
    rows = []
    for (hardware, prompt, gen), group in rated.group_by(["hardware", "prompt_length", "generation_length"],
                                                         maintain_order=True):
        for (model, impl), runs in group.group_by(["model", "impl"], maintain_order=True):
            values = runs["roofline_efficiency"]
            rows.append((hardware, prompt, gen, f"roofline efficiency: {model} {impl}",
                         f"median {values.median():.2g} (min {values.min():.2g}, max {values.max():.2g}; "
                         f"{runs.height} runs; roofs-only predicted / measured latency on {runs['roofline_profile'][0]})",
                         ROOFLINE_ANCHOR, False))
        violated = group.filter(pl.col("roofline_violated").fill_null(False))
        if violated.height:
            ids = ", ".join(violated["run_id"].to_list())
            rows.append((hardware, prompt, gen, "roofline violated",
                         f"{violated.height} run(s) measured faster than 0.9x their roofs-only prediction: {ids}",
                         ROOFLINE_ANCHOR, True))
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA, orient="row")
