"""A run's timing columns from its raw samples (or several sessions' pooled): every per-repetition quantity with
its median, quartiles, interval and spread, the tail percentiles serving benchmarks report, and a diffusion run's
decoding rates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from report.analysis import stats

# Per-repetition quantities, each with its median, quartiles and the interval of its median (CI or range, with its
# kind and n: what a figure's error bars show); the first three also with mean, sd and CV. itl_s is the study's
# (L_e2e - TTFT) / (N_out - 1); itl_pass_s the mean of the timed decode passes.
SUMMARISED_WITH_INTERVAL = ("latency_e2e_s", "tokens_per_s", "goodput_tokens_per_s")
SUMMARISED = ("ttft_s", "decode_s", "itl_s", "itl_pass_s", "step_s")
# Their interval where a row pools several sessions is over the sessions' medians (report/table/sessions.py).
SESSION_SUMMARISED = (*SUMMARISED_WITH_INTERVAL, *SUMMARISED)
SUMMARY_PARTS = ("median", "p25", "p75", "interval_low", "interval_high")
SPREAD_PARTS = ("mean", "sd", "cv")
# Percentiles (p50/p90/p99, as serving benchmarks report them) of TTFT over the repetitions, and over every
# per-token (an AR decode pass: the inter-token latency) and per-step (diffusion) sample of every repetition.
TAILS = ("ttft_s", "itl_token_s", "step_s")


def timing_summaries(
    *, latency: list[float], ttft: list[float], passes: list[list[float]], steps: list[list[float]],
    output_tokens: int, batch_size: int, generation_length: int, useful_mean: float | None,
) -> dict[str, Any]:
    """Every timing column from a run's raw samples (or several sessions' pooled): per-repetition quantities
    summarised with their interval, quartiles and tails, and the samples themselves."""
    per_rep: dict[str, list[float]] = {
        "latency_e2e_s": latency,
        # T_gen = B x N_out / L_e2e (study 3.1.2), one value per repetition.
        "tokens_per_s": [output_tokens / value for value in latency if value > 0],
        # Goodput: B x useful tokens (before the first EOS) / L_e2e.
        "goodput_tokens_per_s": (
            [batch_size * useful_mean / value for value in latency if value > 0] if useful_mean is not None else []
        ),
        "ttft_s": ttft,
        "decode_s": [sum(p) for p in passes],
        # L_itl of one repetition as the study defines it (3.1.1): (L_e2e - L_prefill) / (N_out - 1).
        "itl_s": (
            [(e2e - prefill) / (generation_length - 1) for e2e, prefill in zip(latency, ttft)]
            if ttft and generation_length > 1 else []
        ),
        # The mean of the timed decode passes alone (leaves out the host work between them).
        "itl_pass_s": [_mean(p) for p in passes if p],
        "step_s": [_mean(p) for p in steps if p],
    }
    row: dict[str, Any] = {}
    for name in (*SUMMARISED_WITH_INTERVAL, *SUMMARISED):
        summary = stats.summarize(per_rep[name])
        row.update({
            f"{name}_n": summary.n, f"{name}_median": summary.median, f"{name}_p25": summary.p25,
            f"{name}_p75": summary.p75, f"{name}_interval_low": summary.low, f"{name}_interval_high": summary.high,
            f"{name}_interval": summary.interval,
        })
        if name in SUMMARISED_WITH_INTERVAL:
            row.update({f"{name}_mean": summary.mean, f"{name}_sd": summary.sd, f"{name}_cv": summary.cv})
    for name, values in (("ttft_s", ttft), ("itl_token_s", [v for rep in passes for v in rep]),
                         ("step_s", [v for rep in steps for v in rep])):
        row.update({f"{name}_p{p}": value for p, value in stats.percentiles(values).items()})
    row.update({
        "latency_e2e_s_samples": latency, "tokens_per_s_samples": per_rep["tokens_per_s"], "ttft_s_samples": ttft,
        "itl_s_samples": passes, "step_s_samples": steps,
    })
    return row


def decoding_summaries(
    *, steps: list[list[float]], committed: list[list[int]], batch_size: int, num_blocks: int | None,
    schedule_steps: int | None,
) -> dict[str, Any]:
    """A diffusion run's decoding as serving engines report it, from its repetitions' step times and committed
    tokens (or several sessions' pooled): committed tokens per second, what the timed steps committed (whole batch)
    over those steps' time, median over repetitions; tokens committed per step per sequence, the mean over every
    timed step; and steps per block, the mean over repetitions of the steps a block took (a confidence rule ends
    blocks early; None for a sampler without blocks). `schedule_steps`: an extrapolated run's schedule, which its
    generation ran though only its first steps were timed."""
    rates = [sum(count) / sum(times) for times, count in zip(steps, committed) if times and sum(times) > 0]
    per_step = [count / batch_size for rep in committed for count in rep]
    ran = [schedule_steps or len(rep) for rep in steps]
    return {
        "committed_tokens_per_s_median": stats.median(rates),
        "tokens_per_step_mean": stats.mean(per_step),
        "steps_per_block_mean": stats.mean([n / num_blocks for n in ran]) if num_blocks else None,
    }


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values))
