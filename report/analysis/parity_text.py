"""The sentences of a parity row: the equivalence test behind S_parity, the bootstrap replicates' step counts,
and the speedup there (report/parity.py builds the rows)."""

from __future__ import annotations

from typing import Any

NO_PARITY = "no parity within the swept steps"


def statement(row: dict[str, Any], missing_run: bool = False) -> str:
    """One sentence for a parity row: the calibration gate, the test and S_parity with the replicates' step counts,
    then the speedup at the batch."""
    if not row["decides"]:
        return f"{row['gate']}; not used for parity"  # the gate's words open with CHANCE
    s = row["s_parity_steps"]
    test = (f"TOST at {row['alpha']:g} over {row['n_prompts']} paired prompts: at {row['test_steps']} steps "
            f"{row['test']}, median difference {_signed(row['difference'])} "
            f"[{_signed(row['difference_low'])}, {_signed(row['difference_high'])}]")
    shares = share_text(row)
    if s is None:
        return f"{NO_PARITY}: not {row['margin']} at every larger swept step ({test}; {shares})"
    bound = "<=" if row["s_parity_bound"] == "<=" else "="
    text = f"{row['margin']} (equivalent or better) from {s} steps on (S_parity {bound} {s}; {test}; {shares})"
    if missing_run:
        return text + f"; {row['llada_model']} at {s} steps did not run at B = {row['batch_size']}"
    if row["speedup"] is not None:
        at_least = ">= " if bound == "<=" else ""
        text += (f"; speedup at B = {row['batch_size']}: {at_least}{row['speedup']:.3g}x "
                 f"{bracket(row['speedup_low'], row['speedup_high'])} ({row['speedup_interval']})")
        if bound == "<=":
            text += ", a lower bound: fewer steps were not swept"
    return text


def share_text(row: dict[str, Any]) -> str:
    """'replicates over prompts: 4 steps 58%, 8 steps 42%' (and 'none' for those that never reach parity)."""
    if row["parity_fraction"] is None:
        return f"no replicates: {row['n_prompts']} prompts"
    parts = [f"{k} steps {share:.0%}" for k, share in zip(row["replicate_steps"], row["replicate_shares"])]
    never = 1.0 - row["parity_fraction"]
    if never > 0:
        parts.append(f"none {never:.0%}")
    return f"S_parity in {row['replicates']} bootstrap replicates over prompts: " + ", ".join(parts)


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3g}"


def replicate_span(low: int | None, high: int | None, largest: str) -> str:
    """Where the bootstrap replicates over prompts put S_parity: the swept grid's resolution, which no coverage
    guarantee comes with (a minimum over a grid of step counts is no smooth statistic), so never called a CI."""
    ends = [str(v) if v is not None else f"beyond {largest}" for v in (low, high)]
    span = ends[0] if ends[0] == ends[1] else f"{ends[0]}–{ends[1]}"
    return f"replicates over prompts put it at {span} steps (the grid's resolution, not a confidence interval)"


def bracket(low: float | None, high: float | None) -> str:
    """'[2.3, 3.1]', or 'no interval' where the samples support none."""
    return "(no interval)" if low is None or high is None else f"[{low:.3g}, {high:.3g}]"


