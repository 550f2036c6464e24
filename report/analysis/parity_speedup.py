"""The speedup at S_parity, one parity row per batch size: L_e2e(AR) / L_e2e(dLLM at S_parity) with its interval
conditional on S_parity (report/analysis/intervals.py, over the two runs' sessions and repetitions), and the goodput ratio."""

from __future__ import annotations

from typing import Any

import polars as pl

from report.answer.pairing.pairs import is_ar
from report.analysis.parity_text import statement
from report.table.sessions import row_speedup, shared_median


def speedup_rows(
    base: dict[str, Any], key: dict[str, Any], ok: pl.DataFrame, ar_model: str, level: float, seed: int
) -> list[dict[str, Any]]:
    """One row per batch size that the pair's AR model ran at this grid point: the speedup at S_parity there."""
    grid = ok.filter((pl.col("hardware") == key["hardware"]) & (pl.col("sweep") == key["sweep"])
                     & (pl.col("prompt_length") == key["prompt_length"])
                     & (pl.col("generation_length") == key["generation_length"]))
    llama = grid.filter(is_ar() & (pl.col("model") == ar_model))
    s = base["s_parity_steps"]
    llada = grid.clear() if s is None else grid.filter(
        (pl.col("model") == key["model"]) & (pl.col("steps") == s)
        & pl.col("block_length").eq_missing(key["block_length"]) & pl.col("remasking").eq_missing(key["remasking"])
        & pl.col("sampler_setting").eq_missing(key["sampler_setting"]) & (pl.col("cfg_scale") == key["cfg_scale"])
    )
    out = []
    for batch in sorted(llama["batch_size"].unique().to_list()):
        ar = llama.filter(pl.col("batch_size") == batch).row(0, named=True)
        at = llada.filter(pl.col("batch_size") == batch)
        diffusion = at.row(0, named=True) if at.height else None
        row = {**base, "batch_size": batch, "llama_model": ar["model"],  # over the sessions the speedup rests on
               "llama_latency_e2e_s": shared_median(ar, diffusion) if diffusion else ar["latency_e2e_s_median"]}
        speedup = low = high = goodput = None
        label = None
        if diffusion is not None and diffusion["latency_e2e_s_median"]:
            spread = row_speedup(ar, diffusion)
            speedup, low, high = spread.estimate, spread.low, spread.high
            label = f"{spread.label}, S_parity held at {s}"
            if ar["goodput_tokens_per_s_median"] and diffusion["goodput_tokens_per_s_median"]:
                goodput = diffusion["goodput_tokens_per_s_median"] / ar["goodput_tokens_per_s_median"]
        row.update({
            "llada_latency_e2e_at_parity_s": shared_median(diffusion, ar) if diffusion else None,
            "speedup": speedup, "speedup_low": low, "speedup_high": high, "speedup_interval": label,
            "goodput_speedup": goodput,
            "low_useful": bool(ar["low_useful"]) or bool(diffusion and diffusion["low_useful"]),
        })
        row["statement"] = statement(row, s is not None and diffusion is None)
        out.append(row)
    return out
