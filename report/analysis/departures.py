"""Departures from the study: every control of the study's design (specs/study.py) beside what this sweep's runs
recorded, whether the two agree, and why not where they do not.

The sweep's side is read from the runs (what they recorded, not what was asked), the hardware's also from the
spec's requirement. The why of a departure is the spec's `departures:` entry, else the comment its author wrote
beside the field (report/table/spec_comments.py), else the package's own rule where the departure is the package's
(S_parity, the perplexity reference, synthetic weights), else it says that no reason was given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from report.answer.pairing.pairs import is_dllm
from report.analysis.parity import GREEDY
from report.analysis.quality import FIGURE_METRICS
from report.table.spec_comments import field_comments
from report.table.flat import UNKNOWN_HARDWARE
from specs import study
from specs.schema import ExperimentSpec
from specs.study import StudyControl

NO_REASON = "no reason given (a spec states one under departures.{key})"
# The spec fields whose comment explains a control's setting, first found first.
SPEC_FIELDS: dict[str, tuple[str, ...]] = {
    "models": ("models",), "lengths": ("grid.sequence_lengths", "grid.prompt_lengths", "grid.generation_lengths"),
    "split": ("grid.prompt_fraction", "grid.sequence_lengths", "grid.prompt_lengths", "grid.generation_lengths"),
    "steps": ("grid.llada.steps", "grid.dream.steps"), "batch_sizes": ("grid.batch_sizes",),
    "warmup": ("controls.warmup",), "temperature": ("controls.temperature",),
    "hardware": ("controls.hardware", "controls.device"), "precision": ("controls.dtype",),
    "attention": ("controls.attention",),
}
# The package's own rules where they depart from the study (report/analysis/parity.py).
S_PARITY_RULE = ("the fewest swept k from which f_llada is equivalent to Q_llama or better (a two one-sided test "
                 "on paired prompts against the spec's margin) at k and at every larger swept step, on the metrics "
                 "whose reference beats an unrelated passage by more than the margin")
S_PARITY_WHY = ("f ≥ Q on medians takes no account of noise, and a curve that crosses early and falls back again is "
                "noise, not parity: the package tests equivalence within a stated margin from a step on, and only on "
                "metrics that can tell text from chance (report/analysis/parity.py, report/analysis/equivalence.py)")
REFERENCE_WHY = ("a headline reference other than the AR model's greedy text (the text that was timed) is used only "
                 "where greedy is missing (report/analysis/parity.py)")
SYNTHETIC_WHY = ("random weights at the models' shapes: latency, throughput, memory and energy need the shapes, not "
                 "trained weights; no quality is measured")


@dataclass(frozen=True)
class Departure:
    control: StudyControl
    sweep: str  # what this sweep's runs recorded
    agrees: bool | None  # None: the sweep does not measure it
    why: str  # empty where it agrees and the spec says nothing


# What a control's reader returns: this sweep's value, whether it agrees, and the package's own why (or None).
Reading = tuple[str, bool | None, str | None]


def departures(table: pl.DataFrame, spec: ExperimentSpec | None, spec_text: str | None,
               parity: pl.DataFrame) -> list[Departure]:
    """One row per control of the study (specs/study.CONTROLS), in the study's order. `table`: every run
    (report.table.flat.results_table); `spec_text`: the frozen spec's text (its comments); `parity`:
    report.analysis.parity.parity_table."""
    reasons = dict(spec.departures) if spec is not None else {}
    comments = field_comments(spec_text) if spec_text else {}
    out = []
    for control in study.CONTROLS:
        value, agrees, default = _READERS[control.key](table, spec, parity)
        commented = next((f"{comments[f]} (spec.yaml, beside {f})" for f in SPEC_FIELDS.get(control.key, ())
                          if f in comments), None)
        why = ""
        if agrees is False:
            why = reasons.get(control.key) or commented or default or NO_REASON.format(key=control.key)
        out.append(Departure(control, value, agrees, why))
    return out


def summary(rows: list[Departure]) -> str:
    """'Departs from the study on 3 of 14 controls (…); agrees on …; not measured here: ….'"""
    def names(agrees: bool | None) -> list[str]:
        return [r.control.label for r in rows if r.agrees is agrees]

    departs, agrees, unmeasured = names(False), names(True), names(None)
    text = (f"This sweep departs from the study's design (report-draft.md, sections 3.1.4 and 4) on {len(departs)} "
            f"of {len(rows)} controls" + (f": {', '.join(departs)}" if departs else ""))
    if agrees:
        text += f"; it agrees on {', '.join(agrees)}"
    if unmeasured:
        text += f"; not measured here: {', '.join(unmeasured)}"
    return text + "."


# ---------------------------------------------------------------- each control's reader


def _values(frame: pl.DataFrame, column: str) -> list:
    return sorted(frame[column].drop_nulls().unique().to_list())


def _listed(values: list) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) or "–"


def _measured(table: pl.DataFrame) -> pl.DataFrame:
    """The runs that recorded an environment."""
    return table.filter(pl.col("hardware") != UNKNOWN_HARDWARE)


def _models(table: pl.DataFrame, spec: ExperimentSpec | None, _: pl.DataFrame) -> Reading:
    models = table.select("model", "weights").unique().sort("model")
    sources = {m.name: _source_name(m) for m in spec.models} if spec is not None else {}
    value = "; ".join(f"{m} ({sources.get(m, w)})" for m, w in models.iter_rows())
    synthetic = "synthetic" in models["weights"].to_list()
    named = " ".join(sources.values()).lower()
    agrees = not synthetic and bool(sources) and all(name.lower() in named for name in study.MODELS)
    return value, agrees, SYNTHETIC_WHY if synthetic else None


def _source_name(model) -> str:
    source = model.source
    if hasattr(source, "checkpoint"):
        return source.checkpoint
    return f"synthetic {source.synthetic if isinstance(source.synthetic, str) else 'custom shape'}"


def _pairs(table: pl.DataFrame) -> list[tuple[int, int]]:
    return sorted(table.select("prompt_length", "generation_length").unique().iter_rows())


def _lengths(table: pl.DataFrame, *_) -> Reading:
    totals = sorted({p + g for p, g in _pairs(table)})
    return (f"{_listed(totals)} tokens ({', '.join(f'{p}+{g}' for p, g in _pairs(table))})",
            all(n in study.SEQUENCE_LENGTHS for n in totals), None)


def _split(table: pl.DataFrame, *_) -> Reading:
    pairs = _pairs(table)
    shares = sorted({p / (p + g) for p, g in pairs})
    return (", ".join(f"{s:.0%} prompt" for s in shares), all(s == study.PROMPT_FRACTION for s in shares), None)


def _steps(table: pl.DataFrame, *_) -> Reading:
    steps = _values(table.filter(is_dllm()), "steps")
    if not steps:
        return "no diffusion runs", None, None
    return _listed(steps), all(k in study.STEPS for k in steps), None


def _batch_sizes(table: pl.DataFrame, *_) -> Reading:
    batches = _values(table, "batch_size")
    return _listed(batches), all(b in study.BATCH_SIZES for b in batches), None


def _output_tokens(*_) -> Reading:
    # The decode loop ignores EOS and the diffusion sampler masks exactly N_out (DESIGN.md, Measurement).
    return "exactly N_out for both (EOS ignored; N_out masked)", True, None


def _warmup(table: pl.DataFrame, *_) -> Reading:
    warmups = _values(table, "warmup")
    return _listed(warmups), warmups == [study.WARMUP], None


def _temperature(table: pl.DataFrame, *_) -> Reading:
    temperatures = _values(table, "temperature")
    return _listed(temperatures), all(t <= study.MAX_TEMPERATURE for t in temperatures), None


def _hardware(table: pl.DataFrame, spec: ExperimentSpec | None, _: pl.DataFrame) -> Reading:
    measured = _measured(table)
    devices = _values(measured, "hardware")
    shared = bool(measured["other_gpu_processes"].fill_null(False).any())
    value = _listed(devices) + (", shared with other processes" if shared else "")
    asked = spec.controls.hardware.gpu.strip() if spec is not None else "any"
    if asked.lower() != "any" and not all(asked.lower() in d.lower() for d in devices):
        value += f" (the spec names {asked!r})"
    agrees = bool(devices) and not shared and all(
        all(part.lower() in d.lower() for part in study.GPU_NAME_PARTS) for d in devices)
    return value, agrees, None


def _software(table: pl.DataFrame, *_) -> Reading:
    stacks = _measured(table).select("python_version", "torch_version", "cuda_version").unique().sort(
        "torch_version", nulls_last=True)
    value = "; ".join(f"Python {py or '–'}, PyTorch {torch or '–'}, CUDA {cuda or 'none'}"
                      for py, torch, cuda in stacks.iter_rows())
    agrees = stacks.height > 0 and all(
        _minor(py) == _minor(study.PYTHON) and _at_least(torch, study.TORCH_AT_LEAST) and cuda == study.CUDA
        for py, torch, cuda in stacks.iter_rows())
    return value or "–", agrees, None


def _minor(version: str | None) -> tuple[int, ...]:
    """(major, minor) of '2.11.0+cu130' or '3.12.3'; () when unreadable."""
    parts = (version or "").split("+")[0].split(".")[:2]
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def _at_least(version: str | None, floor: tuple[int, ...]) -> bool:
    return bool(_minor(version)) and _minor(version) >= floor


def _precision(table: pl.DataFrame, *_) -> Reading:
    dtypes = _values(table, "dtype")
    return _listed(dtypes), dtypes == [study.DTYPE], None


def _attention(table: pl.DataFrame, *_) -> Reading:
    kernels = _measured(table).select("model", "attention").unique().sort("model", "attention")
    value = "; ".join(f"{model}: {kernel}" for model, kernel in kernels.iter_rows()) or "–"
    return value, kernels.height > 0 and set(kernels["attention"]) == {study.ATTENTION}, None


def _headline(parity: pl.DataFrame) -> pl.DataFrame:
    """The headline parity rows of the headline metrics (BERTScore F1, perplexity)."""
    return parity.filter(pl.col("headline") & pl.col("metric").is_in(FIGURE_METRICS))


def _s_parity(_: pl.DataFrame, __: ExperimentSpec | None, parity: pl.DataFrame) -> Reading:
    if not _headline(parity).height:
        return "not measured: no quality in this sweep", None, None
    return S_PARITY_RULE, False, S_PARITY_WHY


def _quality_reference(_: pl.DataFrame, __: ExperimentSpec | None, parity: pl.DataFrame) -> Reading:
    headline = _headline(parity).select("metric_label", "reference", "reference_label").unique()
    if not headline.height:
        return "not measured: no quality in this sweep", None, None
    value = "; ".join(f"{metric}: {label}" for metric, _, label in headline.sort("metric_label").iter_rows())
    return value, set(headline["reference"]) == {GREEDY}, REFERENCE_WHY


_READERS: dict[str, Callable[[pl.DataFrame, ExperimentSpec | None, pl.DataFrame], Reading]] = {
    "models": _models, "lengths": _lengths, "split": _split, "steps": _steps, "batch_sizes": _batch_sizes,
    "output_tokens": _output_tokens, "warmup": _warmup, "temperature": _temperature, "hardware": _hardware,
    "software": _software, "precision": _precision, "attention": _attention, "s_parity": _s_parity,
    "quality_reference": _quality_reference,
}
