"""The report's figures in the order the report shows them (report/sections/order.py): an id, file name, section,
what each shows, and how each is made from one hardware kind's runs. The report numbers what it draws in reading
order; the id only keys an entry."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl
from matplotlib.figure import Figure

from report.figures.common import FigureSkipped
from report.figures.energy import energy_per_token
from report.figures.findings import findings_throughput
from report.figures.latency import latency_vs_generation_length, step_time_vs_length
from report.figures.memory import memory_heatmap
from report.figures.quality import (
    block_length_ablation,
    pareto_frontier,
    quality_vs_steps,
    quality_vs_tokens_per_forward,
)
from report.figures.roofline import measured_vs_predicted, roofline_figure
from report.figures.throughput import throughput_by_batch
from report.figures.training import training_curves_table, training_loss
from report.figures.variant_pareto import variant_pareto
from report.figures.variant_speedup import variant_speedup
from report.figures.variant_tokens_per_forward import variant_quality_vs_tokens_per_forward
from report.answer.pairing.pairs import Sides, sweep_pairs
from report.analysis.predictions import ProfileChoice, model_shapes, prediction_table
from report.analysis.quality import FIGURE_METRICS, QualityData
from report.table.flat import quality_notes
from report.analysis.variants import variant_points
from roofline.operators import element_bytes_of
from roofline.plotdata import operator_points
from specs.registry import archs_of


@dataclass
class GroupContext:
    """Everything a figure may need about one hardware kind's runs."""

    hardware: str
    table: pl.DataFrame  # this hardware's vanilla rows of the flat table (every AR-vs-diffusion figure)
    all_table: pl.DataFrame  # this hardware's rows, variants included
    results: list  # this hardware's RunResults, variants included (for roofline predictions)
    quality: QualityData
    profile: ProfileChoice
    crossovers: pl.DataFrame  # report.answer.findings.crossover_table, every hardware
    predicted_throughput: pl.DataFrame  # report.answer.findings.predicted_throughput, every hardware
    variants: pl.DataFrame  # report.analysis.variants.variant_table, this hardware's rows
    variant_quality: pl.DataFrame  # report.analysis.quality.quality_by_run of every run, variants included
    _predictions: pl.DataFrame | None = field(default=None, repr=False)

    def metrics(self) -> list[str]:
        runs = set(self.table["run_id"].to_list())
        present = set(self.quality.by_run.filter(pl.col("run_id").is_in(list(runs)))["metric"].to_list())
        return [m for m in FIGURE_METRICS if m in present]

    def predictions(self) -> pl.DataFrame:
        if self.profile.profile is None:
            raise FigureSkipped(self.profile.reason or f"no roofline profile for hardware {self.hardware}")
        if self._predictions is None:
            self._predictions = prediction_table(self.results, self.all_table, self.profile.profile)
        return self._predictions


Made = list[tuple[str, "Figure | FigureSkipped"]]  # (file stem, the figure or why not)


@dataclass(frozen=True)
class FigureEntry:
    number: int
    slug: str
    title: str  # '{ar}' and '{dllm}' stand for the sides of the sweep's pairs (report.answer.pairing.pairs.Sides)
    section: str
    shows: str  # one sentence for the report and the README, with the same placeholders
    make: Callable[[GroupContext], Made]

    def words(self, sides: Sides) -> tuple[str, str]:
        """The title and the sentence, each side named as the sweep's pairs name it (LLaMA and LLaDA, ...)."""
        return (self.title.format(ar=sides.ar, dllm=sides.dllm), self.shows.format(ar=sides.ar, dllm=sides.dllm))


def _one(slug: str, build: Callable[[], Figure]) -> Made:
    try:
        return [(slug, build())]
    except FigureSkipped as skipped:
        return [(slug, skipped)]


def _single(number: int, slug: str, title: str, section: str, shows: str,
            build: Callable[[GroupContext], Figure]) -> FigureEntry:
    """The entry of a figure made once per hardware kind, its file named by its slug."""
    return FigureEntry(number, slug, title, section, shows, lambda ctx: _one(slug, lambda: build(ctx)))


def _per_metric(slug: str, ctx: GroupContext, build: Callable[[str], Figure]) -> Made:
    metrics = ctx.metrics()
    if not metrics:
        return [(slug, _no_quality(ctx))]
    return [item for metric in metrics for item in _one(f"{slug}_{metric}", lambda m=metric: build(m))]


def _no_quality(ctx: GroupContext) -> FigureSkipped:
    notes = quality_notes(ctx.table)
    return FigureSkipped("no quality values in these runs" + (f" ({'; '.join(notes)})" if notes else ""))


def _tokens_per_forward(ctx: GroupContext) -> Made:
    metrics = ctx.metrics()
    if not metrics:
        return [("quality_vs_tokens_per_forward", _no_quality(ctx))]
    return _one("quality_vs_tokens_per_forward",
                lambda: quality_vs_tokens_per_forward(ctx.table, ctx.quality.by_setting, metrics))


def _roofline(ctx: GroupContext) -> Figure:
    predictions = ctx.predictions()
    profile = ctx.profile.profile
    assert profile is not None
    ok = ctx.table.filter(pl.col("status") == "ok")
    if not ok.height:
        raise FigureSkipped("no successful runs")
    prompt = int(ok["prompt_length"].mode().sort()[0])
    gen = int(ok["generation_length"].max())
    batch = int(ok["batch_size"].min())
    shapes = model_shapes(ctx.results)
    dtype = ok["dtype"].mode().sort()[0]
    # The operators of the sweep's first pair (report/answer/pairing/pairs.py), else of each paradigm's first family.
    pair = next(iter(sweep_pairs(ctx.table)), None)
    ar, dllm = (pair.ar_arch, pair.dllm_arch) if pair else (archs_of("autoregressive")[0], archs_of("diffusion")[0])
    points = operator_points(profile, prompt_len=prompt, gen_len=gen, batch=batch, ar=ar, diffusion=dllm,
                             ar_shape=shapes.get(ar), diffusion_shape=shapes.get(dllm),
                             element_bytes=element_bytes_of(dtype))
    setting = f"prompt {prompt}, N_out {gen}, batch {batch}"
    return roofline_figure(ctx.table, predictions, profile, points, operator_setting=setting,
                           overridden=ctx.profile.overridden)


def _measured_vs_predicted(ctx: GroupContext) -> Figure:
    profile = ctx.profile.profile
    predictions = ctx.predictions()
    assert profile is not None
    return measured_vs_predicted(ctx.table, predictions, profile, overridden=ctx.profile.overridden)


def _variant_metrics(ctx: GroupContext) -> list[str]:
    """The headline metrics some variant run of this hardware has."""
    runs = ctx.variants["run_id"].to_list()
    present = set(ctx.variant_quality.filter(pl.col("run_id").is_in(runs))["metric"].to_list())
    return [m for m in FIGURE_METRICS if m in present]


# A sweep without variant runs has no variant figures at all (not a list of skipped ones): its Variants section
# says so in one line.


def _variant_speedup(ctx: GroupContext) -> Made:
    if not ctx.variants.height:
        return []
    return _one("variant_speedup", lambda: variant_speedup(ctx.all_table, ctx.variants))


def _variant_pareto(ctx: GroupContext) -> Made:
    if not ctx.variants.height:
        return []
    metrics = _variant_metrics(ctx)
    if not metrics:
        return [("variant_pareto", FigureSkipped("no variant run has a quality value"))]
    return [item for m in metrics for item in _one(f"variant_pareto_{m}", lambda m=m: variant_pareto(
        ctx.all_table, variant_points(ctx.all_table, ctx.variant_quality, m), m))]


def _variant_tokens_per_forward(ctx: GroupContext) -> Made:
    slug = "variant_quality_vs_tokens_per_forward"
    if not ctx.variants.height:
        return []
    metrics = _variant_metrics(ctx)
    if not metrics:
        return [(slug, FigureSkipped("no variant run has a quality value"))]
    return _one(slug, lambda: variant_quality_vs_tokens_per_forward(
        ctx.all_table, {m: variant_points(ctx.all_table, ctx.variant_quality, m) for m in metrics}))


def _energy(ctx: GroupContext) -> Made:
    # No counter, no figure (CPUs often expose none): the Energy section says so in one line.
    if "joules_per_token" not in ctx.all_table.columns or ctx.all_table["joules_per_token"].is_null().all():
        return []
    return _one("energy_per_token", lambda: energy_per_token(ctx.all_table))


def _metric_for_ablation(ctx: GroupContext) -> str | None:
    metrics = ctx.metrics()
    return metrics[0] if metrics else None


FIGURES: tuple[FigureEntry, ...] = (
    _single(10, "findings_throughput", "Throughput vs batch size, and where {ar} overtakes {dllm}", "findings",
            "Median tokens/s against batch size for {ar} and {dllm} at each step count, as points with their "
            "intervals (hollow: extrapolated from the first timed steps); dotted between measured batches, the "
            "log-B interpolation B* is read from (not measured); the faithful roofline's floor-calibrated "
            "prediction for the same device dash-dotted; and B* (where {ar} overtakes) marked.",
            lambda c: findings_throughput(c.table, c.predicted_throughput, c.crossovers)),
    _single(5, "latency_vs_generation_length", "Latency vs generation length", "latency",
            "Median end-to-end latency against N_out for both models, one panel per batch size; {ar}'s latency also "
            "split into its prefill (TTFT) and its decode passes, {dllm} one line per step count (hollow: "
            "extrapolated).", lambda c: latency_vs_generation_length(c.table)),
    _single(7, "step_time_vs_length", "Per-step time vs length", "latency",
            "{dllm}'s time per diffusion step against sequence length, and {ar}'s inter-token latency "
            "against the context each decode pass attends, one line per batch size.",
            lambda c: step_time_vs_length(c.table)),
    _single(3, "throughput_by_batch", "Throughput by batch size", "throughput",
            "Generation throughput (B x N_out / latency) per batch size, both models side by side, each bar with "
            "the interval of its median (hollow: extrapolated), goodput (useful tokens only) as black ticks; "
            "batches that ran out of memory are marked OOM.",
            lambda c: throughput_by_batch(c.table)),
    _single(4, "memory_heatmap", "Memory heatmap", "memory",
            "Peak reserved memory (on CPU: the peak bytes of live tensors above the weights, from an untimed "
            "profiled generation) over sequence length x batch size, one heatmap per model on a shared colour "
            "scale, out-of-memory cells hatched.",
            lambda c: memory_heatmap(c.table)),
    FigureEntry(1, "pareto_frontier", "Latency-quality Pareto frontier", "quality",
                "End-to-end latency (log) against quality: {ar} a point per batch size, {dllm} a curve over "
                "diffusion steps, the Pareto frontier dashed; one panel per generation length, one figure per metric.",
                lambda c: _per_metric("pareto_frontier", c, lambda m: pareto_frontier(c.table, c.quality.by_run, m))),
    FigureEntry(2, "quality_vs_steps", "Quality vs diffusion steps", "quality",
                "{dllm}'s quality against its step count with its interval over prompts, {ar}'s levels (greedy as "
                "a band, sampled dotted), and S_parity against the metric's headline reference where it is reached.",
                lambda c: _per_metric("quality_vs_steps", c, lambda m: quality_vs_steps(
                    c.table, c.quality.by_setting, m, c.quality.parity_markers))),
    FigureEntry(11, "quality_vs_tokens_per_forward", "Quality vs tokens per forward pass", "quality",
                "Quality against tokens generated per model forward pass ({ar} 1, {dllm} N_out / steps), one panel "
                "per metric: samplers compared independently of the hardware.",
                _tokens_per_forward),
    _single(16, "training_loss", "Training loss of the trained models", "quality",
            "The held-out loss of each model this package trained against the training tokens it had seen, the "
            "evaluation it ships circled: both members under the one training rule.",
            lambda c: training_loss(c.table, training_curves_table(c.results))),
    _single(6, "block_length_ablation", "Block-length ablation", "quality",
            "{dllm} latency and quality against block length at fixed step counts.",
            lambda c: block_length_ablation(c.table, c.quality.by_setting, _metric_for_ablation(c))),
    FigureEntry(12, "variant_speedup", "Speedup of each variant over vanilla", "variants",
                "Each accelerated variant's speedup over vanilla (ratio of median latencies at the same point) "
                "against batch size, with its interval, the faithful roofline's predicted speedup dashed.",
                _variant_speedup),
    FigureEntry(13, "variant_pareto", "Latency-quality Pareto frontier with every variant", "variants",
                "Median latency against quality for vanilla and every variant, one panel per generation length and "
                "batch size, the Pareto frontier dashed; one figure per metric.",
                _variant_pareto),
    FigureEntry(14, "variant_quality_vs_tokens_per_forward", "Quality vs tokens per forward with every variant",
                "variants",
                "Quality against tokens per forward pass (N_out over the forwards that ran) for vanilla and every "
                "variant at its smallest batch size, one panel per metric.",
                _variant_tokens_per_forward),
    _single(8, "roofline", "Roofline with measured operating points", "roofline",
            "The roofs of the device that ran (measured by its worker, else its datasheet) with the operators of "
            "a {ar} prefill, a decode pass and a {dllm} step, and each run's measured operating point (hollow: "
            "extrapolated).",
            _roofline),
    _single(9, "measured_vs_predicted", "Measured vs predicted latency", "roofline",
            "Each run's median measured latency against the roofline's prediction on the device that ran "
            "(study and faithful models; with the host or dispatch floor, a calibrated model, and on the roofs "
            "alone, a lower bound on each run's time), with the y = x line; runs faster than 0.9x their roofs-only "
            "prediction circled as roofline violated; hollow: extrapolated.",
            _measured_vs_predicted),
    FigureEntry(15, "energy_per_token", "Energy per generated token by batch size", "energy",
                "Joules per generated token against batch size for each model, implementation and {dllm} step "
                "count, from the counter read around the measured repetitions (NVML's board, RAPL's packages); "
                "points scaled from extrapolated steps hollow.",
                _energy),
)

# A figure's file: its stem (a slug, or slug_metric), then `--<hardware>` when a sweep ran on several kinds.
_FIGURE_FILE = re.compile(r"^(?P<stem>[a-z0-9_]+)(?:--[a-z0-9]+(?:-[a-z0-9]+)*)?\.(?:png|svg)$")
_STEMS = frozenset({e.slug for e in FIGURES} | {f"{e.slug}_{m}" for e in FIGURES for m in FIGURE_METRICS})


def is_catalogue_figure(name: str) -> bool:
    """Whether a file name is one the report gives a figure it draws: the only files in figures/ it may remove."""
    match = _FIGURE_FILE.match(name)
    return match is not None and match["stem"] in _STEMS
