"""Figure 16: the held-out loss of every model this package trained against the tokens it had seen, the shipped
evaluation marked, so that the training rule the pair shares (the same token budget, each at its best held-out
loss) can be checked by eye. The LLaMA member's curve is its next-token cross-entropy; the LLaDA member's is its
masked-diffusion bound, an upper bound on its NLL: the two are not comparable in level, only in shape."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl
from matplotlib.figure import Figure

from report.figures.common import ARCH_COLOR, ARCH_LABEL, FigureSkipped, Series
from report.figures.frame import Frame
from specs.results import RunResult

CURVE_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.String, "arch": pl.String, "hardware": pl.String, "step": pl.Int64, "tokens": pl.Int64,
    "heldout_loss": pl.Float64, "shipped": pl.Boolean, "measure": pl.String, "rule": pl.String,
}


def training_curves_table(results: Iterable[RunResult]) -> pl.DataFrame:
    """One row per held-out evaluation of each trained model the runs loaded (schema CURVE_SCHEMA)."""
    rows, seen = [], set()
    for result in results:
        p = result.model_provenance
        if p is None or not p.evaluations or result.config.model.name in seen:
            continue
        seen.add(result.config.model.name)
        hardware = result.environment.device if result.environment else "unknown"
        for e in p.evaluations:
            rows.append({"model": result.config.model.name, "arch": p.arch, "hardware": hardware, "step": e.step,
                         "tokens": e.tokens, "heldout_loss": e.heldout_loss, "shipped": e.step == p.shipped_step,
                         "measure": p.heldout_measure, "rule": p.training_rule})
    return pl.DataFrame(rows, schema=CURVE_SCHEMA, orient="row") if rows else pl.DataFrame(schema=CURVE_SCHEMA)


def training_loss(df: pl.DataFrame, curves: pl.DataFrame) -> Figure:
    """Held-out loss (nats/token) against tokens seen (millions), one line per trained model, the shipped
    evaluation circled. `df`: this hardware's runs (the caption); `curves`: training_curves_table."""
    frame = Frame.of("training_loss", df)
    curves = curves.filter(pl.col("hardware") == frame.hardware)
    if not curves.height:
        raise FigureSkipped("no run loaded a model with a training log (models trained by llada-bench train)")
    (ax,) = frame.draw(1, columns=1, panel_size=(6.4, 4.2))
    series = []
    for model in curves["model"].unique().sort().to_list():
        rows = curves.filter(pl.col("model") == model).sort("step")
        arch = rows["arch"][0]
        label = f"{model} ({ARCH_LABEL.get(arch, arch)}: {rows['measure'][0]})"
        s = Series(label, "line", tuple(t / 1e6 for t in rows["tokens"]), tuple(rows["heldout_loss"]), arch=arch,
                   model=model, markers=tuple("shipped" if x else "" for x in rows["shipped"]))
        series.append(s)
        color = ARCH_COLOR.get(arch, "black")
        ax.plot(s.x, s.y, color=color, marker="o", markersize=3, linewidth=1.2, label=label)
        shipped = rows.filter(pl.col("shipped"))
        if shipped.height:
            ax.scatter(shipped["tokens"].to_numpy() / 1e6, shipped["heldout_loss"].to_numpy(), s=90,
                       facecolors="none", edgecolors=color, linewidths=1.5, zorder=5)
    frame.panel(ax, "held-out loss during training", "training tokens seen (millions)", "held-out nats/token",
                "linear", "linear", series)
    rules = [r for r in curves["rule"].unique().drop_nulls().to_list()]
    notes = (("Training rule: " + "; ".join(rules) + ".") if rules else "No training rule recorded.",
             "Circled: the evaluation each model ships. The AR curve is a cross-entropy, the diffusion curve an upper "
             "bound on the NLL: compare their shapes, not their levels.")
    return frame.finish("Training loss of the trained models", notes, df)
