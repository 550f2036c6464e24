"""Section 5, Memory: peak memory per run, out-of-memory runs included, with the weights and the KV cache."""

from __future__ import annotations

import polars as pl

from report.document.content import fmt_bytes
from report.sections.cells import column_table, key_columns, simple
from report.sections.inputs import Blocks, ReportInputs


def build(inputs: ReportInputs, multi: bool) -> Blocks:
    rows = inputs.table.filter(pl.col("status").is_in(["ok", "oom"]))
    columns = [
        *simple(key_columns(multi, rows)), ("status", "status"),
        ("peak allocated", lambda r: fmt_bytes(r["peak_allocated_bytes"])),
        ("graph pool", lambda r: fmt_bytes(r["graph_pool_bytes"])),
        ("peak in use", lambda r: fmt_bytes(r["peak_in_use_bytes"])),
        ("peak reserved", lambda r: fmt_bytes(r["peak_reserved_bytes"])),
        ("RSS growth", lambda r: fmt_bytes(r["peak_rss_delta_bytes"])),
        ("tensor peak (CPU)", lambda r: fmt_bytes(r["peak_tensor_bytes"])),
        ("weights", lambda r: fmt_bytes(r["weights_bytes"])),
        ("held at OOM", lambda r: fmt_bytes(r["at_failure_allocated_bytes"])),
        ("KV cache", lambda r: fmt_bytes(r["cache_bytes"])),
    ]
    return Blocks([], [column_table(rows, columns, CAPTION)])


CAPTION = (
    "Peak memory per run. Graph pool: what CUDA graphs' private pools reserved (a graph variant's replays write "
    "their intermediates there without allocating, so the allocated peak misses them); peak in use: the allocated "
    "peak plus the pools' bytes no live tensor holds; reserved includes the pools. KV cache: the peak bytes a "
    "variant's cache held (LLaDA's prefix or dual cache). RSS growth (CPU): the process's resident set over the "
    "repetitions, which varies with what malloc keeps; tensor peak (CPU): the most bytes of tensors alive at once in "
    "an untimed profiled generation after them, above the weights, which repeats for the same shapes. '–': not "
    "measured (older artifacts have no graph pool or tensor peak)."
)
