"""The short plain-text table of a sweep's runs printed at the end of a sweep or report, then where the report is."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from report.document.content import fmt_bytes, fmt_rate, fmt_seconds
from specs.schema import VANILLA

SUMMARY_ROWS = 40


def summary_table(table: pl.DataFrame, html: Path, written: int, skipped: int) -> str:
    """A short plain-text table of the runs for the end of a sweep, then where the report is."""
    multi = table["hardware"].n_unique() > 1
    algs = table["sampler_setting"].drop_nulls().len() > 0  # Dream's alg, block diffusion's threshold: where present
    header = (["hardware"] if multi else []) + ["model", "impl", "B", "P", "N_out", "steps", "block",
                                                *(["setting"] if algs else []), "status", "latency", "tokens/s",
                                                "forwards", "peak memory"]
    rows = []
    for r in table.head(SUMMARY_ROWS).iter_rows(named=True):
        rows.append(([r["hardware"][:24]] if multi else []) + [
            r["model"], r["impl"] or VANILLA, str(r["batch_size"]), str(r["prompt_length"]), str(r["generation_length"]),
            "–" if r["steps"] is None else str(r["steps"]), "–" if r["block_length"] is None else str(r["block_length"]),
            *([r["sampler_setting"] or "–"] if algs else []),
            r["status"], fmt_seconds(r["latency_e2e_s_median"]),
            fmt_rate(r["tokens_per_s_median"]), "–" if r["forwards"] is None else f"{r['forwards']:g}",
            fmt_bytes(r["peak_memory_bytes"]),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    if table.height > SUMMARY_ROWS:
        lines.append(f"… {table.height - SUMMARY_ROWS} more runs in results.parquet and the report")
    lines.append(f"report: {html} ({written} figures written, {skipped} skipped)")
    return "\n".join(lines)
