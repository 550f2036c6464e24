"""The answer in one place: per generation length, S_parity on the headline metrics with the speedup at every
batch size measured, and the batch size B* where the autoregressive model's throughput overtakes the diffusion
model's at each step count, per pair (report/pairs.py: LLaMA against LLaDA, Qwen2.5 against Dream), measured and
interpolated between batch sizes, beside the faithful roofline's B* on the device that ran."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from report.document import fmt_float
from report.extrapolation import trusted
from report.pairs import is_ar, is_dllm, pair_of, peers_of, sweep_pairs
from report.quality import FIGURE_METRICS
from report.table import vanilla_runs, with_dream_alg
from roofline.crossover import diffusion_keywords, predicted_crossover
from roofline.hardware import HardwareProfile
from roofline.operators import element_bytes_of
from roofline.predict import predict
from specs.registry import family
from specs.shapes import ModelShape

# Short metric names for the Findings' rows (the linked tables carry the full labels).
SHORT_LABEL = {"bertscore_f1": "BERTScore F1", "gen_ppl": "perplexity"}
# Where the Findings' numbers come from: anchors of the tables they link to.
PARITY_ANCHOR = "parity-table"
CROSSOVER_ANCHOR = "crossover-table"

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

CROSSOVER_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "prompt_length": _I64, "generation_length": _I64, "llama_model": _STR, "llada_model": _STR,
    "steps": _I64, "block_length": _I64, "batch_sizes": _STR, "throughput_ratios": _STR, "b_star": _F64,
    "b_star_bound": _STR, "b_star_tokens_per_s": _F64, "predicted_b_star": _F64, "predicted_b_star_roofs": _F64,
    "profile": _STR, "dream_alg": _STR, "ar_title": _STR, "dllm_title": _STR,
}
PREDICTED_THROUGHPUT_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "prompt_length": _I64, "generation_length": _I64, "arch": _STR, "model": _STR,
    "steps": _I64, "block_length": _I64, "batch_size": _I64, "predicted_tokens_per_s": _F64, "profile": _STR,
    "dream_alg": _STR,
}
FINDINGS_SCHEMA: dict[str, pl.DataType] = {
    "hardware": _STR, "prompt_length": _I64, "generation_length": _I64, "finding": _STR, "value": _STR,
    "source": _STR, "warning": _BOOL,
}


def measured_crossover(batches: Sequence[int], ratios: Sequence[float]) -> tuple[float, str]:
    """B* from throughput ratios T(AR) / T(dLLM) at increasing batch sizes: the batch from which the autoregressive
    model stays ahead at every larger measured batch, interpolated linearly in log B and log ratio from the batch
    before it. Returns (B*, "=") for a crossing, (B_min, "<=") when the AR model is ahead already at the smallest
    batch, and (B_max, ">") when the diffusion model is still ahead at the largest."""
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    ahead = logs >= 0
    holds = np.flip(np.logical_and.accumulate(np.flip(ahead)))  # LLaMA ahead from here on
    if not holds[-1]:
        return float(batches[-1]), ">"
    first = int(holds.argmax())
    if first == 0:
        return float(batches[0]), "<="
    b0, b1 = math.log(batches[first - 1]), math.log(batches[first])
    r0, r1 = logs[first - 1], logs[first]
    fraction = -r0 / (r1 - r0) if r1 != r0 else 1.0
    return math.exp(b0 + fraction * (b1 - b0)), "="


def crossover_table(
    table: pl.DataFrame, profiles: dict[str, HardwareProfile], shapes: dict[str, ModelShape]
) -> pl.DataFrame:
    """One row per pair, hardware, lengths and diffusion setting (step count, block, Dream's alg): the measured B*
    and the faithful roofline's B* on that hardware's profile (with and without its floor: host or dispatch),
    schema CROSSOVER_SCHEMA. Vanilla runs only: B* compares the two paradigms, not their variants. `shapes`: each
    arch's shape (report.predictions.model_shapes)."""
    table = with_dream_alg(vanilla_runs(table))
    pairs = sweep_pairs(table)
    ok = trusted(table.filter((pl.col("status") == "ok") & pl.col("tokens_per_s_median").is_not_null()))
    autoregressive = ok.filter(is_ar())
    rows = []
    keys = ["hardware", "prompt_length", "generation_length", "model", "steps", "block_length", "remasking",
            "dream_alg", "cfg_scale", "dtype"]
    for key, runs in ok.filter(is_dllm()).group_by(keys, maintain_order=True):
        hardware, prompt, gen, model, steps, block, _, alg, cfg, dtype = key
        ar = autoregressive.filter((pl.col("hardware") == hardware) & (pl.col("prompt_length") == prompt)
                                   & (pl.col("generation_length") == gen))
        for ar_model in peers_of(pairs, model):
            pair = pair_of(pairs, ar_model, model)
            assert pair is not None, "peers_of names the pairs' models"
            joined = runs.select("batch_size", pl.col("tokens_per_s_median").alias("dllm")).join(
                ar.filter(pl.col("model") == ar_model).select("batch_size", pl.col("tokens_per_s_median").alias("ar")),
                on="batch_size",
            ).sort("batch_size")
            if not joined.height:
                continue
            batches, ratios = joined["batch_size"].to_list(), (joined["ar"] / joined["dllm"]).to_list()
            b_star, bound = measured_crossover(batches, ratios)
            at_b_star = _log_interpolate(batches, joined["ar"].to_list(), b_star)
            profile = profiles.get(hardware)
            predicted = predicted_roofs = None
            if profile is not None and not cfg:
                common = {"ar": pair.ar_arch, "diffusion": pair.dllm_arch, "ar_shape": shapes.get(pair.ar_arch),
                          "diffusion_shape": shapes.get(pair.dllm_arch), "prompt_len": prompt, "gen_len": gen,
                          "steps": steps, "block_length": block, "element_bytes": element_bytes_of(dtype),
                          "diffusion_sampling": {"alg": alg} if alg else None}
                predicted = predicted_crossover(profile, **common)
                floored = profile.dispatch_s or profile.host_floor_s
                predicted_roofs = (predicted_crossover(profile.model_copy(update={"dispatch_s": 0.0, "host_floor_s": 0.0}),
                                                       **common) if floored else predicted)
            rows.append((hardware, prompt, gen, ar_model, model, steps, block, ", ".join(map(str, batches)),
                         ", ".join(f"{r:.3g}" for r in ratios), b_star, bound, at_b_star, predicted, predicted_roofs,
                         profile.name if profile else None, alg, pair.ar_title, pair.dllm_title))
    frame = pl.DataFrame(rows, schema=CROSSOVER_SCHEMA, orient="row")
    return frame.sort(["hardware", "generation_length", "prompt_length", "llada_model", "block_length", "steps",
                       "dream_alg", "llama_model"])


def _log_interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """y at x on the log-log line through the measured points around it (the throughput where B* is marked)."""
    return float(np.exp(np.interp(math.log(x), np.log(xs), np.log(ys))))


def predicted_throughput(
    table: pl.DataFrame, profiles: dict[str, HardwareProfile], shapes: dict[str, ModelShape], *, points: int = 12
) -> pl.DataFrame:
    """The faithful roofline's tokens/s of each model setting over the measured batch range (schema
    PREDICTED_THROUGHPUT_SCHEMA): the curves the Findings figure overlays on the measured throughput (vanilla)."""
    ok = with_dream_alg(vanilla_runs(table)).filter(pl.col("status") == "ok")
    rows = []
    keys = ["hardware", "prompt_length", "generation_length", "arch", "model", "steps", "block_length", "dream_alg",
            "dtype"]
    for key, runs in ok.filter(pl.col("cfg_scale").is_null() | (pl.col("cfg_scale") == 0)).group_by(
            keys, maintain_order=True):
        hardware, prompt, gen, arch, model, steps, block, alg, dtype = key
        profile = profiles.get(hardware)
        if profile is None:
            continue
        low, high = int(runs["batch_size"].min()), int(runs["batch_size"].max())
        grid = sorted({int(round(b)) for b in np.geomspace(low, high, points)} | {low, high})
        # The diffusion model as the workers run it (roofline.crossover.diffusion_keywords), with Dream's alg.
        sampler = ({**diffusion_keywords(arch, steps=steps, block_length=block), **({"alg": alg} if alg else {})}
                   if family(arch).is_diffusion else {})
        for batch in grid:
            p = predict(arch, shapes.get(arch), batch=batch, prompt_len=prompt, gen_len=gen, hardware=profile,
                        element_bytes=element_bytes_of(dtype), **sampler)
            rows.append((hardware, prompt, gen, arch, model, steps, block, batch, p.tokens_per_s, profile.name, alg))
    return pl.DataFrame(rows, schema=PREDICTED_THROUGHPUT_SCHEMA, orient="row")


# ---------------------------------------------------------------- the Findings table


def findings_table(parity: pl.DataFrame, crossovers: pl.DataFrame, warnings: Iterable[str] = ()) -> pl.DataFrame:
    """The Findings as rows (schema FINDINGS_SCHEMA), per hardware and generation length: S_parity on each
    headline metric against its headline reference, the speedup there at every batch size (with goodput), and
    B* at every step count with the roofline's B* beside it. `warnings` (models that learned nothing beyond
    unigram statistics) come first, on every hardware."""
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
        for (metric, model, block, alg, _), group in with_dream_alg(at).group_by(
                ["metric", "llada_model", "block_length", "dream_alg", "llama_model"], maintain_order=True):
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
            alg = f" ({row['dream_alg']})" if row["dream_alg"] else ""
            rows.append((hardware, prompt, gen,
                         f"B*: {row['llama_model']} overtakes {row['llada_model']} at {row['steps']} "
                         + ("step" if row["steps"] == 1 else "steps") + alg,
                         _crossover_value(row), CROSSOVER_ANCHOR, False))
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA, orient="row")


def _parity_value(row: dict) -> str:
    s = row["s_parity_steps"]
    fraction = row["parity_fraction"]
    reach = (f"{fraction:.0%} of {row['replicates']} bootstrap replicates reach parity" if fraction is not None
             else f"{row['n_prompts']} prompts: no interval")
    largest = row["steps_swept"].split(", ")[-1]
    if s is None:
        text = f"none within {row['steps_swept']} steps ({reach})"
    else:
        low, high = row["s_parity_low_steps"], row["s_parity_high_steps"]
        interval = (f"95% CI {low if low is not None else '>' + largest}–{high if high is not None else '>' + largest}; "
                    if fraction is not None else "")
        text = f"{'<= ' if row['s_parity_bound'] == '<=' else ''}{s} steps ({interval}{reach})"
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
    text = (f"{bound}{row['speedup']:.3g}x [{row['speedup_low']:.3g}, {row['speedup_high']:.3g}] "
            f"({row['speedup_interval']})")
    if row["goodput_speedup"] is not None:
        text += f"; goodput {bound}{row['goodput_speedup']:.3g}x"
    if row["low_useful"]:
        text += "; FLAG: under 90% of the tokens come before the first EOS"
    return text, bool(row["low_useful"])


def _crossover_value(row: dict) -> str:
    b, bound, batches = row["b_star"], row["b_star_bound"], row["batch_sizes"]
    text = b_star_measured_text(b, bound, batches, row["ar_title"], row["dllm_title"])
    predicted, roofs = row["predicted_b_star"], row["predicted_b_star_roofs"]
    if row["profile"] is None:
        return text + "; no roofline profile for this device"
    prediction = "beyond 4096" if predicted is None else f"{predicted:.3g}"
    text += f"; roofline ({row['profile']}): {prediction}"
    if roofs != predicted:
        text += f" ({'beyond 4096' if roofs is None else f'{roofs:.3g}'} on the roofs alone, without the floor)"
    return text


def b_star_measured_text(b: float, bound: str, batches: str, ar: str, dllm: str) -> str:
    """The measured B* in words: '<= 1: LLaMA ahead at every batch measured (1, 8)', or a crossing."""
    if bound == "<=":
        return f"<= {b:g}: {ar} ahead at every batch measured ({batches})"
    if bound == ">":
        return f"> {b:g}: {dllm} ahead at every batch measured ({batches})"
    return f"{b:.3g} (between measured batches {batches})"


def findings_text(findings: pl.DataFrame) -> str:
    """The Findings table as plain text for the terminal: the last thing a sweep prints."""
    if not findings.height:
        return "Findings: none (no successful runs of both models at the same lengths)"
    multi = findings["hardware"].n_unique() > 1
    lines = ["Findings"]
    for (hardware, prompt, gen), group in findings.group_by(["hardware", "prompt_length", "generation_length"],
                                                            maintain_order=True):
        lines.append(f"  N_out = {gen} (prompt {prompt})" + (f" on {hardware}" if multi else ""))
        width = max(len(f) for f in group["finding"].to_list())
        for finding, value in group.select("finding", "value").iter_rows():
            lines.append(f"    {finding.ljust(width)}  {value}")
    return "\n".join(lines)


ROOFLINE_ANCHOR = "roofline-table"


def roofline_findings(table: pl.DataFrame) -> pl.DataFrame:
    """Rows of the Findings (FINDINGS_SCHEMA) per hardware and lengths: the median roofline efficiency (roofs-only
    predicted latency / measured) of each model and implementation, and, flagged, every run that violated the
    roofline (measured faster than 0.9x its roofs-only prediction, report/predictions.py)."""
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
