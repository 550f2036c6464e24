"""Progress of a sweep: one line per finished run and a live bar (runs done / total, ETA)."""

from __future__ import annotations

import statistics
import sys
from typing import TextIO

from tqdm import tqdm

from specs.results import RunResult


def describe_run(result: RunResult) -> str:
    """One line: status, model, the grid point, the median latency, the run id."""
    c = result.config
    point = f"B={c.batch_size} P={c.prompt_length} G={c.generation_length}"
    if c.steps is not None:
        point += f" steps={c.steps}"
        point += f" block={c.block_length}" if c.block_length is not None else f" {c.commit_rule}"
        if c.cfg_scale:
            point += f" cfg={c.cfg_scale:g}"
    if c.llada_impl is not None or c.llama_impl is not None or c.dream_impl is not None:
        point += f" {c.impl_name}"
    if result.samples and result.samples.latency_e2e_s:
        outcome = f"e2e {statistics.median(result.samples.latency_e2e_s):.4f} s"
    else:
        outcome = (result.error or "").splitlines()[0][:80] if result.error else ""
    if result.samples and result.samples.forwards and c.llada_impl is not None and c.llada_impl.parallel:
        outcome += f", {statistics.median(result.samples.forwards):g} forwards"
    if result.unscored:
        outcome += f", quality not scored: {(result.quality_error or '').splitlines()[0][:80]}"
    return f"{result.outcome:<8} {c.model.name:<14} {point:<36} {outcome}  ({result.run_id})"


class Progress:
    """Writes through tqdm so the per-run lines never tear the bar."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        # disable=None: a live bar on a terminal; in logs (CI, SLURM, ray job logs) only the per-run lines.
        self._bar = tqdm(total=total, unit="run", file=self._stream, dynamic_ncols=True, leave=True, disable=None)
        self._done = 0
        self._total = total

    def finished(self, result: RunResult) -> None:
        self._done += 1
        width = len(str(self._total))
        self._bar.write(f"[{self._done:>{width}}/{self._total}] {describe_run(result)}", file=self._stream)
        self._bar.update(1)

    def note(self, message: str) -> None:
        self._bar.write(message, file=self._stream)

    def close(self) -> None:
        self._bar.close()
