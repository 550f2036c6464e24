"""RunResult artifacts → one flat polars row per run: config, environment, summary statistics and raw samples."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from report.analysis import stats
from report.answer.pairing.pairs import is_dllm
from report.table.timing import (
    SPREAD_PARTS,
    SUMMARISED,
    SUMMARISED_WITH_INTERVAL,
    SUMMARY_PARTS,
    TAILS,
    decoding_summaries,
    timing_summaries,
)
from specs.artifacts import canonical_json
from specs.engines import PYTORCH, engine
from specs.registry import family
from specs.results import UNIGRAM_MARGIN_NATS, QualityRecord, RunResult
from specs.schema import VANILLA, RunConfig

UNKNOWN_HARDWARE = "unknown"

# Quality metrics a QualityRecord can carry (its Monte-Carlo standard errors are not metrics), and which way is
# better.
QUALITY_METRICS: tuple[str, ...] = tuple(
    name for name in QualityRecord.model_fields if name != "prompt_id" and not name.endswith("_stderr")
)
HIGHER_IS_BETTER: dict[str, bool] = {
    "bertscore_precision": True, "bertscore_recall": True, "bertscore_f1": True,
    "nll_per_token": False, "gen_ppl": False, "elbo_nll_per_token": False,
    "repeated_bigram_rate": False, "distinct_1": True, "distinct_2": True,
}
# A run whose useful tokens (before the first EOS) fall below this share of N_out is flagged: its throughput
# counts tokens nobody reads.
USEFUL_FRACTION_FLAG = 0.9

_F64, _I64, _STR, _BOOL = pl.Float64, pl.Int64, pl.String, pl.Boolean

SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR, "sweep": _STR, "config_key": _STR, "session": _I64, "started_at": _STR, "finished_at": _STR,
    "model": _STR, "arch": _STR, "paradigm": _STR, "impl": _STR, "execution": _STR, "engine": _STR,
    "weights": _STR,
    "status": _STR, "error": _STR, "attempts": _I64,
    "hardware": _STR, "device_kind": _STR, "dtype": _STR, "attention": _STR, "timer": _STR,
    "torch_version": _STR, "cuda_version": _STR, "driver": _STR, "git_commit": _STR, "image_digest": _STR,
    "hostname": _STR, "other_gpu_processes": _BOOL, "python_version": _STR,
    "batch_size": _I64, "prompt_length": _I64, "generation_length": _I64, "sequence_length": _I64,
    "output_tokens": _I64, "steps": _I64, "block_length": _I64, "num_blocks": _I64, "remasking": _STR,
    # The diffusion sampler's setting besides steps and block (`sampler_setting`): each is its own curve, as LLaDA's
    # block and remasking are.
    "sampler_setting": _STR,
    "cfg_scale": _F64, "temperature": _F64, "warmup": _I64, "repetitions": _I64,
    **{f"{name}_{part}": _F64 for name in SUMMARISED_WITH_INTERVAL for part in (*SUMMARY_PARTS, *SPREAD_PARTS)},
    **{f"{name}_n": _I64 for name in SUMMARISED_WITH_INTERVAL},
    **{f"{name}_interval": _STR for name in SUMMARISED_WITH_INTERVAL},
    **{f"{name}_{part}": _F64 for name in SUMMARISED for part in SUMMARY_PARTS},
    **{f"{name}_n": _I64 for name in SUMMARISED},
    **{f"{name}_interval": _STR for name in SUMMARISED},
    **{f"{name}_p{p}": _F64 for name in TAILS for p in stats.TAIL_PERCENTILES},
    # A diffusion run's decoding under the names serving engines give it (`decoding_summaries`).
    "committed_tokens_per_s_median": _F64, "tokens_per_step_mean": _F64, "steps_per_block_mean": _F64,
    "peak_allocated_bytes": _I64, "peak_reserved_bytes": _I64, "peak_rss_delta_bytes": _I64,
    "weights_bytes": _I64, "at_failure_allocated_bytes": _I64, "graph_pool_bytes": _I64, "peak_in_use_bytes": _I64,
    "peak_tensor_bytes": _I64, "peak_memory_bytes": _I64, "peak_memory_kind": _STR,
    "timed_steps": _I64, "extrapolated": _BOOL,
    # An extrapolated run's median timed step over the full runs' at its shape, and whether that is off by more
    # than the tolerance (report/analysis/extrapolation.py; null: not extrapolated, or no full run to check against).
    "extrapolation_step_ratio": _F64, "extrapolation_suspect": _BOOL,
    "nfe": _I64, "forwards": _F64, "tokens_per_forward": _F64, "cache_bytes": _I64, "preparation_s": _F64,
    "model_load_s": _F64,
    # The faithful roofline on the run's own profile (report/analysis/predictions.py): the roofs alone (a lower bound), with
    # the profile's floor, the roofs-only share the run reached, and whether it ran faster than the bound allows.
    "roofline_profile": _STR, "predicted_latency_roofs_s": _F64, "predicted_latency_s": _F64,
    "roofline_efficiency": _F64, "roofline_violated": _BOOL,
    # Energy of the measured repetitions (report/analysis/energy.py): `energy_joules_timed` is what the counter read over
    # the timed region; `joules_per_token` is scaled to the whole generation where `energy_extrapolated`.
    "energy_source": _STR, "energy_scope": _STR, "energy_joules_timed": _F64, "energy_seconds": _F64,
    "energy_tokens": _I64, "joules_per_token": _F64, "energy_extrapolated": _BOOL, "energy_power_w": _F64,
    **{f"{metric}_mean": _F64 for metric in QUALITY_METRICS},
    "quality_prompts": _I64, "quality_note": _STR,
    "useful_tokens_mean": _F64, "useful_tokens_total": _I64, "useful_fraction": _F64, "low_useful": _BOOL,
    "provenance_parameters": _I64, "provenance_tokens_seen": _I64, "provenance_heldout_loss_nats": _F64,
    "provenance_heldout_measure": _STR, "provenance_unigram_entropy_nats": _F64,
    "provenance_learned_beyond_unigram": _BOOL,
    "latency_e2e_s_samples": pl.List(_F64), "warmup_latency_s_samples": pl.List(_F64),
    "tokens_per_s_samples": pl.List(_F64), "ttft_s_samples": pl.List(_F64),
    "itl_s_samples": pl.List(pl.List(_F64)), "step_s_samples": pl.List(pl.List(_F64)),
    "tokens_committed_samples": pl.List(pl.List(_I64)), "forwards_samples": pl.List(_I64),
    **{f"{metric}_samples": pl.List(_F64) for metric in QUALITY_METRICS},
    # A configuration's runs across sessions (report/table/sessions.py pools them; one run: these describe it alone).
    "sessions": _I64, "session_ids": pl.List(_I64), "run_ids": pl.List(_STR),
    "latency_e2e_s_by_session": pl.List(pl.List(_F64)),
    # The spec's controls.sessions, and the configuration's status in each (ok, a failure, or "not run").
    "planned_sessions": _I64, "session_statuses": pl.List(_STR),
}


def results_table(results: Iterable[RunResult]) -> pl.DataFrame:
    """One flat row per run (schema `SCHEMA`): the autoregressive baselines first, then by model, hardware and the
    grid, each grid point's vanilla run before its variants."""
    rows = [_row(result) for result in results]
    table = pl.DataFrame(rows, schema=SCHEMA, orient="row") if rows else pl.DataFrame(schema=SCHEMA)
    return table.sort(
        [pl.col("paradigm") != "autoregressive", "model", "hardware", "generation_length", "prompt_length",
         "batch_size", "steps", "block_length", "sampler_setting", pl.col("impl") != VANILLA, "impl", "session",
         "run_id"],
        nulls_last=True,
    )


def vanilla_runs(table: pl.DataFrame) -> pl.DataFrame:
    """The rows of the vanilla implementations: every analysis that compares LLaMA with LLaDA (Findings, parity,
    crossover, Pareto, throughput and latency figures) reads these only, so adding variant runs to a sweep
    never moves them; the Variants section compares each variant with these."""
    if "impl" not in table.columns:  # a frame built before variants (or for one analysis) holds vanilla only
        return table
    return table.filter(pl.col("impl").is_null() | (pl.col("impl") == VANILLA))


def sampler_setting(config: RunConfig) -> str | None:
    """The diffusion sampler's setting besides its steps and block, in words (None where a family has none): Dream's
    alg ("alg entropy"), block diffusion's sub-block and threshold ("sub-block 8, threshold 0.9"). Runs that differ
    only in it share `steps` and `block_length` (block diffusion's steps are its fixed schedule), so it keys every
    curve, row, S_parity and pairing."""
    if config.dream is not None:
        return f"alg {config.dream.alg}"
    if config.block_diffusion is not None:
        return f"sub-block {config.block_diffusion.sub_block_length}, threshold {config.block_diffusion.threshold:g}"
    return None


def roofline_sampling(setting: str | None, forwards: float | None = None) -> dict[str, Any]:
    """The roofline's sampler keywords (roofline.crossover.throughput_ratio's `diffusion_sampling`) of a
    `sampler_setting`: Dream's alg; block diffusion's sub-block and its runs' measured forwards per generation,
    which its threshold sets (its schedule's K stands where none were measured)."""
    if not setting:
        return {}
    if setting.startswith("alg "):
        return {"alg": setting.removeprefix("alg ")}
    sub_block = setting.removeprefix("sub-block ").partition(",")[0]
    # Whole forwards, rounded down: the roofline stays a lower bound.
    return {"sub_block_length": int(sub_block), **({"forwards": int(forwards)} if forwards else {})}


def with_sampler_setting(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with a `sampler_setting` column (null where absent: a frame built before it, or by hand for one
    analysis), so every diffusion curve can be keyed by it."""
    if "sampler_setting" in frame.columns:
        return frame
    return frame.with_columns(pl.lit(None, pl.String).alias("sampler_setting"))


def has_variants(table: pl.DataFrame) -> bool:
    """Whether any run is an accelerated variant (not the vanilla implementation)."""
    return vanilla_runs(table).height < table.height


# What makes two runs the same grid point, whichever way their latency was obtained.
GRID_POINT = ("sweep", "hardware", "model", "arch", "impl", "prompt_length", "generation_length", "batch_size", "steps",
              "block_length", "remasking", "sampler_setting", "cfg_scale", "temperature", "dtype")


def full_where_measured(table: pl.DataFrame) -> pl.DataFrame:
    """One row per grid point: where a sweep timed a point both ways (controls.extrapolation's check runs), the
    full measurement stands and the extrapolated one is left to the extrapolation check, so an analysis never
    averages an extrapolated latency with a measured one. A point timed only by extrapolation keeps its row (its
    `extrapolated` column says so)."""
    if "extrapolated" not in table.columns or not table.height:
        return table
    keys = [k for k in GRID_POINT if k in table.columns]
    measured = (~pl.col("extrapolated").fill_null(False)).any().over(keys) if keys else pl.lit(False)
    return table.filter(~pl.col("extrapolated").fill_null(False) | ~measured)


def _row(result: RunResult) -> dict[str, Any]:
    config = result.config
    env = result.environment
    memory = result.memory
    samples = result.samples
    session = config.session or 0  # 0 for a sweep of one session
    row: dict[str, Any] = {
        "run_id": result.run_id, "sweep": result.sweep, "config_key": config_key(config), "session": session,
        "started_at": result.started_at, "finished_at": result.finished_at, "model": config.model.name, "arch": config.model.arch,
        "paradigm": family(config.model.arch).paradigm,
        "weights": result.weights, "status": result.status.value, "error": result.error,
        "attempts": result.attempts,
        "hardware": env.device if env else UNKNOWN_HARDWARE,
        "device_kind": memory.device if memory else (None if env is None else ("cpu" if env.device == "cpu" else "cuda")),
        "dtype": (env.dtype if env and env.dtype else config.controls.dtype),
        "attention": (env.attention_kernel if env and env.attention_kernel else config.controls.attention),
        "timer": samples.timer if samples else None,
        "torch_version": env.torch if env else None, "cuda_version": env.cuda if env else None,
        "driver": env.driver if env else None, "git_commit": env.git_commit if env else None,
        "image_digest": env.image_digest if env else None, "hostname": env.hostname if env else None,
        "other_gpu_processes": env.other_gpu_processes if env else None, "python_version": env.python if env else None,
        "batch_size": config.batch_size, "prompt_length": config.prompt_length,
        "generation_length": config.generation_length, "sequence_length": config.sequence_length,
        "output_tokens": config.output_tokens, "steps": config.steps, "block_length": config.block_length,
        "num_blocks": config.num_blocks, "remasking": config.remasking,
        "sampler_setting": sampler_setting(config), "cfg_scale": config.cfg_scale,
        "temperature": config.controls.temperature, "warmup": config.controls.warmup,
        "repetitions": config.controls.repetitions, "planned_sessions": config.controls.sessions,
        "impl": config.impl_name, "execution": execution_of(config), "engine": config.engine,
        "timed_steps": config.timed_steps,
        "extrapolated": bool(samples and samples.extrapolated is not None),
        "nfe": result.nfe, "model_load_s": result.model_load_s,
        "cache_bytes": result.cache_bytes, "preparation_s": result.preparation_s,
    }
    measured = list(samples.forwards) if samples and samples.forwards else []
    forwards = forwards_per_generation(config.model.arch, config.generation_length, result.nfe, config.cfg_scale,
                                       measured)
    row["forwards"] = forwards
    row["forwards_samples"] = measured
    row["tokens_per_forward"] = config.generation_length / forwards if forwards else None
    useful = [g.useful_tokens for g in result.generations]
    useful_mean = stats.mean(useful)
    row["useful_tokens_mean"] = useful_mean
    row["useful_tokens_total"] = sum(useful) if useful else None
    row["useful_fraction"] = useful_mean / config.generation_length if useful_mean is not None else None
    row["low_useful"] = None if useful_mean is None else row["useful_fraction"] < USEFUL_FRACTION_FLAG
    row.update(_timing_columns(result, useful_mean))
    samples = result.samples
    if samples is not None and samples.step_s and samples.tokens_committed:
        row.update(decoding_summaries(
            steps=[list(s) for s in samples.step_s], committed=[list(c) for c in samples.tokens_committed],
            batch_size=config.batch_size, num_blocks=config.num_blocks,
            schedule_steps=config.steps if samples.extrapolated is not None else None))
    row.update(_memory_columns(result))
    row.update(_energy_columns(result))
    row.update(_quality_columns(result.quality, result.quality_note))
    row.update(_provenance_columns(result))
    row.update({"sessions": 1, "session_ids": [session], "run_ids": [result.run_id],
                "latency_e2e_s_by_session": [row["latency_e2e_s_samples"]]})
    return row


# What a configuration's runs in different sessions differ by: the session, and the quality that only one of
# them measures (quality does not depend on the session).
_PER_SESSION_FIELDS = ("session", "quality", "evaluator", "second_evaluator")


EAGER, COMPILED, GRAPH_CAPTURED = "eager", "compiled", "graph-captured"


def execution_of(config: RunConfig) -> str:
    """How the run's implementation executes: in another engine (its name: llama.cpp's compiled C/C++), graph-captured
    (CUDA graphs replay every step), compiled (torch.compile) or eager (Python dispatches every operator: on a fast
    GPU, host-bound)."""
    if config.engine != PYTORCH:
        return engine(config.engine).title
    impl = config.llada_impl or config.llama_impl or config.dream_impl or config.block_diffusion_impl
    if getattr(impl, "graph", False):
        return GRAPH_CAPTURED
    if getattr(impl, "compile", False):
        return COMPILED
    return EAGER


def config_key(config: RunConfig) -> str:
    """A short hash of the config without its per-session fields: the same measured configuration in every
    session has the same key (report/table/sessions.py pools its runs by it)."""
    data = config.model_dump(mode="json")
    for name in _PER_SESSION_FIELDS:
        data.pop(name, None)
    data.get("controls", {}).pop("sessions", None)
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()[:12]


def forwards_per_generation(
    arch: str, generation_length: int, nfe: int | None, cfg_scale: float | None, measured: Sequence[int] = ()
) -> float:
    """Model forward passes per generated sequence: an autoregressive model's prefill and N_out - 1 decode passes
    give N_out tokens from N_out forwards; a diffusion model runs one per step, two with classifier-free guidance
    (the conditional and the unconditional pass, batched together). A variant whose confidence rule ends blocks
    early records the forwards of each repetition (`measured`): their median stands for the schedule's count."""
    diffusion = family(arch).is_diffusion
    if measured:
        passes = float(stats.median([float(m) for m in measured]) or 0.0)
    elif not diffusion:
        return float(generation_length)
    else:
        passes = float(nfe or 0)
    return passes * (2 if cfg_scale and diffusion else 1)


def _provenance_columns(result: RunResult) -> dict[str, Any]:
    p = result.model_provenance
    if p is None:
        return {}
    return {
        "provenance_parameters": p.parameters, "provenance_tokens_seen": p.tokens_seen,
        "provenance_heldout_loss_nats": p.heldout_loss_nats, "provenance_heldout_measure": p.heldout_measure,
        "provenance_unigram_entropy_nats": p.unigram_entropy_nats,
        "provenance_learned_beyond_unigram": p.learned_beyond_unigram,
    }


def _timing_columns(result: RunResult, useful_mean: float | None) -> dict[str, Any]:
    samples = result.samples
    return {
        **timing_summaries(
            latency=list(samples.latency_e2e_s) if samples else [],
            ttft=list(samples.ttft_s or []) if samples else [],
            passes=[list(p) for p in samples.itl_s] if samples and samples.itl_s else [],
            steps=[list(p) for p in samples.step_s] if samples and samples.step_s else [],
            output_tokens=result.config.output_tokens, batch_size=result.config.batch_size,
            generation_length=result.config.generation_length, useful_mean=useful_mean,
        ),
        "warmup_latency_s_samples": list(samples.warmup_latency_s) if samples else [],
        "tokens_committed_samples": (
            [list(s) for s in samples.tokens_committed] if samples and samples.tokens_committed else []
        ),
    }


def _memory_columns(result: RunResult) -> dict[str, Any]:
    memory = result.memory
    if memory is None:
        return {"peak_memory_kind": None}
    # The heatmap's one number per run: reserved memory on a GPU; on CPU the tensors' peak, else (older artifacts)
    # the process's RSS growth, which the heatmap refuses to draw.
    if memory.peak_reserved_bytes is not None:
        peak, kind = memory.peak_reserved_bytes, "reserved"
    elif memory.peak_tensor_bytes is not None:
        peak, kind = memory.peak_tensor_bytes, "tensors"
    elif memory.peak_rss_delta_bytes is not None:
        peak, kind = memory.peak_rss_delta_bytes, "rss_delta"
    else:
        peak, kind = None, None
    return {
        "peak_allocated_bytes": memory.peak_allocated_bytes, "peak_reserved_bytes": memory.peak_reserved_bytes,
        "peak_rss_delta_bytes": memory.peak_rss_delta_bytes, "weights_bytes": memory.weights_bytes,
        "at_failure_allocated_bytes": memory.at_failure_allocated_bytes,
        # CUDA graphs' pools: replays write them without allocating (workers/measure/memory.py)
        "graph_pool_bytes": memory.graph_pool_bytes, "peak_in_use_bytes": memory.peak_in_use_bytes,
        "peak_tensor_bytes": memory.peak_tensor_bytes, "peak_memory_bytes": peak, "peak_memory_kind": kind,
    }


def _energy_columns(result: RunResult) -> dict[str, Any]:
    """The run's energy record, flat. An extrapolated run's `joules_per_token` is scaled from its timed steps:
    the flag says so, read from the record or (artifacts older than the flag) from the samples."""
    energy = result.energy
    if energy is None:
        return {}
    extrapolated = energy.extrapolated or bool(result.samples and result.samples.extrapolated is not None)
    return {
        "energy_source": energy.source, "energy_scope": energy.scope, "energy_joules_timed": energy.joules,
        "energy_seconds": energy.seconds, "energy_tokens": energy.generated_tokens,
        "joules_per_token": energy.joules_per_token, "energy_extrapolated": extrapolated,
        "energy_power_w": energy.joules / energy.seconds if energy.seconds > 0 else None,
    }


def _quality_columns(records: Sequence[QualityRecord] | None, note: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {"quality_note": note, "quality_prompts": len(records) if records else None}
    for metric in QUALITY_METRICS:
        values = [getattr(r, metric) for r in records or [] if getattr(r, metric) is not None]
        row[f"{metric}_samples"] = values
        row[f"{metric}_mean"] = stats.mean(values)
    return row


def quality_notes(table: pl.DataFrame) -> list[str]:
    """The distinct quality notes of the successful runs (a run's note may join several with ';')."""
    ok = table.filter(pl.col("status") == "ok")
    parts = {part.strip() for note in ok["quality_note"].drop_nulls().to_list() for part in note.split(";")}
    return sorted(part for part in parts if part)


def provenance_notes(table: pl.DataFrame) -> list[str]:
    """One line per model that ships a training log: trained here, its size, tokens seen and held-out loss."""
    rows = table.filter(pl.col("provenance_parameters").is_not_null()).unique("model").sort("model")
    return [
        f"{r['model']}: trained here (llada-bench train), {r['provenance_parameters'] / 1e6:.2f}M parameters, "
        f"{r['provenance_tokens_seen'] / 1e6:.2f}M tokens seen, held-out {r['provenance_heldout_measure']} "
        f"{r['provenance_heldout_loss_nats']:.3f} nats (corpus unigram entropy "
        f"{r['provenance_unigram_entropy_nats']:.3f})."
        for r in rows.iter_rows(named=True)
    ]


def unlearned_warnings(table: pl.DataFrame) -> list[str]:
    """A warning per diffusion model whose held-out loss is not clearly below the unigram entropy: its quality
    curves would look like findings and mean nothing."""
    rows = table.filter(is_dllm() & (pl.col("provenance_learned_beyond_unigram") == False))  # noqa: E712
    return [
        f"WARNING: {r['model']} has not learned beyond unigram statistics (held-out "
        f"{r['provenance_heldout_loss_nats']:.3f} nats vs unigram entropy {r['provenance_unigram_entropy_nats']:.3f}; "
        f"needs {UNIGRAM_MARGIN_NATS:g} nats below it): its quality curves do not measure the sampler."
        for r in rows.unique("model").sort("model").iter_rows(named=True)
    ]
