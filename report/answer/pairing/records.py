"""The pairing objects findings.json holds (report/answer/pairing/build.py builds them): each side's runs and how they execute,
the speedup at every batch with its interval and what it rests on, B* measured and the roofline's, and S_parity."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from report.analysis.intervals import Crossover
from report.answer.pairing.pairs import Pair
from specs.registry import archs_of

# A pairing record built without its families (an older caller) is of the first family of each paradigm.
_FIRST_AR, _FIRST_DLLM = archs_of("autoregressive")[0], archs_of("diffusion")[0]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SParity(_Record):
    """The vanilla diffusion model's S_parity on one headline metric against its headline reference."""

    metric: str
    reference: str
    judge: str | None = None  # the model that scores the metric (perplexity's evaluator), where one does
    judge_under_test: bool = False  # the judge is the pair's own autoregressive model
    steps: int | None  # None: no parity within the swept steps
    bound: str | None  # "=" or "<=" (parity already at the fewest swept steps)
    # The S_parity of bootstrap replicates over prompts spans these step counts: the swept grid's resolution, no
    # confidence interval (None: above the largest swept, or too few prompts).
    replicate_low_steps: int | None = None
    replicate_high_steps: int | None = None
    parity_fraction: float | None = None  # share of bootstrap replicates that reach parity
    # The equivalence test behind it (report/analysis/equivalence.py): its margin, α and prompts; the replicates' S_parity
    # by step count (shares in step order); whether the metric passed its calibration gate, and the gate's words.
    margin: str | None = None
    alpha: float | None = None
    n_prompts: int | None = None
    replicate_steps: list[int] = []
    replicate_shares: list[float] = []
    decides: bool = True
    gate: str | None = None
    # The test's interval's real coverage, its power at the margin where the true difference is 0 (from the per-prompt
    # sd) and the prompts 80% power needs; the step counts whose text is degenerate (distinct-2 short of the human
    # text's by more than the spec's diversity margin: no parity there), and the reference's and human text's distinct-2.
    coverage: float | None = None
    power: float | None = None
    power_sd: float | None = None
    prompts_for_power: int | None = None
    degenerate_steps: list[int] = []
    reference_diversity: float | None = None
    human_diversity: float | None = None


class PairingPoint(_Record):
    """One batch size: both runs, how each executes, the speedup with its interval and basis, their energy."""

    batch_size: int
    llama_impl: str
    llada_impl: str
    llama_execution: str  # eager, compiled or graph-captured (report.table.flat.execution_of)
    llada_execution: str
    llama_run_id: str
    llada_run_id: str
    llama_latency_s: float
    llada_latency_s: float
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    interval_level: float | None  # the interval's nominal coverage (None: no interval)
    interval_method: str  # report.analysis.intervals: "t-sessions", "welch-log" or "none"
    interval_label: str  # e.g. "95% t interval over sessions, 3 sessions x 5 + 5 repetitions"
    sessions: int
    llama_repetitions: int  # a session's (the fewest)
    llada_repetitions: int
    llada_extrapolated: bool  # the diffusion latency timed from its first steps, the rest extrapolated
    llama_joules_per_token: float | None = None
    llada_joules_per_token: float | None = None
    llada_energy_extrapolated: bool | None = None
    # Each side's median time per forward (a decode pass; a diffusion step) and the share of its roofs it reached
    # (roofs-only predicted latency / measured): how much of a latency is host overhead.
    llama_forward_s: float | None = None
    llada_forward_s: float | None = None
    llama_roofs_fraction: float | None = None
    llada_roofs_fraction: float | None = None
    llada_timed_steps: int | None = None  # an extrapolated latency's timed steps
    llada_extrapolation_checked: bool | None = None  # a full run at its batch and shape checked it (None: not extrapolated)
    # Where the repetitions' steps at its vanilla shape split into two modes (report.analysis.extrapolation.step_modes): the
    # two modes' median step and the speedup at each, the diffusion latency scaled by its step to the mode's.
    llada_step_modes_s: list[float] | None = None
    speedup_at_modes: list[float] | None = None
    # Each planned session the speedup could not use, with why (written to findings.json only where there is one);
    # the two latencies above rest on the same sessions as the speedup.
    sessions_left_out: list[str] = []


class Pairing(_Record):
    """One pairing of one pair at one diffusion setting over the batch sizes both ran. `llama_*`: the pair's
    autoregressive model, `llada_*`: its diffusion model (of families `ar_arch` and `dllm_arch`). Every B* comes with
    its bound: "=" a crossing between measured (or, for the roofline, computed) batches, "<=" the autoregressive
    model ahead already at the smallest batch (the value is that batch), ">" not yet at the largest. The measured B*
    is None with one batch size (report.analysis.intervals.MIN_BATCHES), its interval None where a speedup has none."""

    pairing: Literal["engine", "best", "best-ar", "vanilla"]
    hardware: str
    prompt_length: int
    generation_length: int
    steps: int
    block_length: int | None  # None: a family without blocks (Dream)
    llama_model: str
    llada_model: str
    llama_impls: list[str]  # every implementation the pairing used, in the order of the batch sizes
    llada_impls: list[str]
    s_parity: list[SParity]
    at_s_parity: list[str]  # the metrics whose S_parity is this step count
    speedups: list[PairingPoint]
    b_star_measured: float | None
    b_star_bound: str | None
    b_star_low: float | None
    b_star_low_bound: str | None
    b_star_high: float | None
    b_star_high_bound: str | None
    b_star_level: float | None  # the pointwise level of the intervals it inverts
    roofline_profile: str | None
    b_star_coverage: float | None = None  # what inverting one pointwise interval per batch guarantees (union bound)
    b_star_roofs: float | None = None  # the roofs-only model's (None: no profile, CFG, or an error in roofline_note)
    b_star_roofs_bound: str | None = None
    b_star_calibrated: float | None = None  # the floor-calibrated model's: fitted to measured runs
    b_star_calibrated_bound: str | None = None
    calibration: str | None = None  # the floor and what it was fitted on (None: the profile has none)
    roofline_note: str | None = None
    roofline_implementations: dict[str, str] | None = None  # best pairing: the fastest predicted at B*
    # Written to findings.json only where they say something (findings_json): Dream's alg where it has one, the
    # families where a sweep has several pairs.
    sampler_setting: str | None = None
    ar_arch: str = _FIRST_AR
    dllm_arch: str = _FIRST_DLLM

    @property
    def pair(self) -> Pair:
        return Pair(ar_model=self.llama_model, ar_arch=self.ar_arch, dllm_model=self.llada_model,
                    dllm_arch=self.dllm_arch)

    @property
    def b_star(self) -> Crossover | None:
        if self.b_star_measured is None or self.b_star_bound is None:
            return None
        left_out = tuple(dict.fromkeys(gap for q in self.speedups for gap in q.sessions_left_out))
        return Crossover(self.b_star_measured, self.b_star_bound, self.b_star_low, self.b_star_low_bound,
                         self.b_star_high, self.b_star_high_bound, self.b_star_level, len(self.speedups), left_out)

    @property
    def quality_measured(self) -> bool:
        """Whether the sweep measured the diffusion model's quality at these lengths (S_parity was sought)."""
        return bool(self.s_parity)
