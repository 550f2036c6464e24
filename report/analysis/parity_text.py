"""The sentences of a parity row: the equivalence test behind S_parity, the bootstrap replicates' step counts,
and the speedup there (report/analysis/parity.py builds the rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from report.analysis.equivalence import CHANCE, MARGIN_TOO_WIDE, POWER_TARGET, TOO_FEW, WORSE, TostResult, min_prompts

if TYPE_CHECKING:
    from report.analysis.diversity import Floor
    from report.analysis.equivalence import Margin

NO_PARITY = "no parity within the swept steps"
DEGENERATE_REFERENCE = "the reference is degenerate"


def statement(row: dict[str, Any], missing_run: bool = False) -> str:
    """One sentence for a parity row: the calibration gate, the test and S_parity with the replicates' step counts,
    then the speedup at the batch."""
    if not row["decides"]:
        return f"{row['gate']}; not used for parity"  # the gate's words say why: too few prompts, a degenerate
        # reference, a metric at chance or a margin too wide
    s = row["s_parity_steps"]
    test = (f"TOST at {row['alpha']:g} over {row['n_prompts']} paired prompts: at {row['test_steps']} steps "
            f"{row['test']}, median difference {_signed(row['difference'])} "
            f"[{_signed(row['difference_low'])}, {_signed(row['difference_high'])}]{coverage_text(row)}; "
            f"{power_text(row)}")
    shares = share_text(row) + degenerate_text(row)
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




def coverage_text(row: dict[str, Any]) -> str:
    """' (a 93.6% interval)': the sign-test interval's real coverage, which its order statistics put above 1 − 2α."""
    return "" if row.get("difference_coverage") is None else f" (a {row['difference_coverage']:.1%} interval)"


def power_text(row: dict[str, Any]) -> str:
    """'power 27% at the margin where the true difference is 0 (per-prompt sd 0.31; 80% needs 111 prompts)'."""
    if row.get("power") is None:
        return "power not estimable (no spread between prompts)"
    needed = row.get("prompts_for_power")
    need = (f"{POWER_TARGET:.0%} needs {needed} prompts" if needed is not None else
            f"no prompt count up to 100,000 reaches {POWER_TARGET:.0%}")
    return (f"power {row['power']:.0%} to find parity where the true difference is 0 (per-prompt sd "
            f"{row['power_sd']:.3g}; {need})")


def degenerate_text(row: dict[str, Any]) -> str:
    """'; degenerate at 1, 2 steps (distinct-2 short of the human text's 0.93 by more than 0.1): no parity there'."""
    steps = row.get("degenerate_steps") or []
    if not steps:
        return ""
    return (f"; degenerate at {', '.join(str(k) for k in steps)} steps (distinct-2 short of the human text's "
            f"{row['human_diversity']:.2f} by more than {row['diversity_margin']:g}): no parity there")


def too_few_text(n: int, alpha: float) -> str:
    return (f"{TOO_FEW}: {n} paired prompt{'s' if n != 1 else ''}, and a two one-sided test at {alpha:g} needs at "
            f"least {min_prompts(alpha)}")


def degenerate_reference_text(floor: Floor, value: float) -> str:
    return f"{DEGENERATE_REFERENCE} ({floor.shortfall(value)}): its score is no quality to match"


def gate_text(gate: TostResult | None, margin: Margin) -> str:
    """The calibration gate's words: it separates text; or the margin is wider than the gap to an unrelated passage
    (which is surely worse, by less than the margin: blame the margin); or the metric cannot tell text from chance."""
    if gate is None:
        return "no unrelated passage scored: the calibration gate was not applied"
    span = f"{gate.median:+.3g} [{gate.low:+.3g}, {gate.high:+.3g}]"
    if gate.outcome == WORSE:
        return f"an unrelated passage is worse than the reference by {span}, beyond the margin: the metric separates text"
    if gate.low > 0:
        return f"{MARGIN_TOO_WIDE} ({span}, margin {margin.text}): a narrower margin would let the metric decide"
    return f"{CHANCE}: an unrelated passage is worse than the reference by only {span}, not beyond the margin"


def percent(share: float) -> str:
    """A share as a percentage with three significant digits: 0.1 → '10%', 0.004 → '0.4%' (never '0%')."""
    return f"{share * 100:.3g}%"
