"""Section 8, Roofline: how far each model runs from its roofline on the device that ran, with the figures'
notes on the profiles used."""

from __future__ import annotations

import polars as pl

from report.document.content import Block, Paragraph, Table, fmt_float
from report.sections.inputs import Blocks, ReportInputs

CAPTION = ("How far each model runs from its roofline on the device that ran (1 = at the roof), with the profile's "
           "floor (the host floor per eager forward, else the per-kernel dispatch floor: a calibrated model fitted "
           "to measured runs, not a bound; none on the study's datasheet profiles) and on the roofs alone. The roofs "
           "alone are a lower bound on a run's time: a run measured faster than 0.9x of it is counted as 'roofline "
           "violated'")


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    lead: list[Block] = [Paragraph(note) for note in inputs.roofline_notes]
    pred = inputs.predictions.filter(pl.col("predicted_latency_s").is_not_null())
    if not pred.height:
        return Blocks(lead, [])
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
    return Blocks(lead, [Table(
        ("hardware", "profile", "fidelity", "model", "impl", "measured / predicted, with floor (median)", "min",
         "max", "measured / predicted, roofs only (median)", "min", "max", "runs", "roofline violated"),
        tuple((h, p, f, m, i, fmt_float(md), fmt_float(lo), fmt_float(hi), fmt_float(rmd), fmt_float(rlo),
               fmt_float(rhi), str(n), str(v))
              for h, p, f, m, i, md, lo, hi, rmd, rlo, rhi, n, v in ratios.iter_rows()),
        CAPTION, fold=False, anchor="roofline-table",
    )])
