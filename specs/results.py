"""What one run returns: raw samples, memory, environment, generations and quality (one JSON artifact)."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specs.schema import RunConfig
from specs.shapes import ModelShape


class Record(BaseModel):
    """Base of every result model: strict on read, immutable once made."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RunStatus(str, Enum):
    OK = "ok"
    ERROR = "error"  # the run raised; the traceback is kept
    OOM = "oom"  # out of memory: a finding (the memory wall), not a crash
    REFUSED = "refused"  # the hardware did not meet the spec's requirement
    CRASHED = "crashed"  # the worker died more often than the retry bound
    SKIPPED = "skipped"  # the roofline predicted it cannot fit and the spec asked to skip


# An extrapolated run is suspect when its median timed step is off the full runs' at the same shape by more than
# this (either way): a vanilla step costs the same whatever the step count, and the H200 campaign's check points
# agree within 4% but for one that was 38% slow (report/analysis/extrapolation.py, orchestrator/extrapolation.py).
EXTRAPOLATION_TOLERANCE = 0.10


class ExtrapolatedLatency(Record):
    """A LLaDA run that timed only its first `timed_steps` of `steps` (controls.extrapolation).

    Its `latency_e2e_s` are extrapolated: each is the truncated generation's end-to-end time plus
    (steps - timed_steps) x the mean of its timed steps; `measured_e2e_s` keeps what was actually timed.
    `step_s` and `tokens_committed` hold the timed steps only.
    """

    method: Literal["first_steps_mean"] = "first_steps_mean"
    timed_steps: int
    steps: int
    measured_e2e_s: list[float]


class HostLoad(Record):
    """The machine's 1-, 5- and 15-minute load averages (runnable tasks) as a run's repetitions started and as they
    ended, and the CPUs its worker could run on: more runnable tasks than CPUs means some waited for one."""

    start: list[float]
    end: list[float]
    cpus: int


class Samples(Record):
    """Raw timings, never aggregated in the worker (medians and CIs are the report's job)."""

    timer: Literal["cuda_event", "perf_counter"]
    warmup_latency_s: list[float] = Field(default_factory=list)
    latency_e2e_s: list[float]  # one per measured repetition
    batch_index: list[int]  # which prompt batch each repetition ran
    ttft_s: list[float] | None = None  # LLaMA: prefill of each repetition
    itl_s: list[list[float]] | None = None  # LLaMA: each decode step of each repetition
    step_s: list[list[float]] | None = None  # LLaDA: each diffusion step of each repetition
    tokens_committed: list[list[int]] | None = None  # LLaDA: tokens unmasked per step (whole batch)
    forwards: list[int] | None = None  # model forwards of each measured repetition (varies with a threshold)
    extrapolated: ExtrapolatedLatency | None = None  # set: latency_e2e_s is extrapolated, not measured
    # CPU timer: the process's CPU time (all threads) in each measured repetition, beside its wall time (the measured
    # one where extrapolated); None on a GPU, whose time it is not, and in artifacts written before it was read.
    cpu_s: list[float] | None = None
    host_load: HostLoad | None = None  # the machine's load around the repetitions; None in older artifacts


class Memory(Record):
    """Peak memory of the measured region; on CPU the process's RSS growth, and the tensors' own peak from an untimed
    generation after it."""

    device: Literal["cuda", "cpu"]
    weights_bytes: int
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    peak_rss_delta_bytes: int | None = None
    at_failure_allocated_bytes: int | None = None  # OOM runs: what was held when it failed
    # GPU: allocated when the measured region started (the measured model alone: weights plus buffers).
    baseline_allocated_bytes: int | None = None
    # GPU: bytes CUDA graphs' private pools reserved (their replays' working set, which no allocation counts),
    # and of those the bytes live tensors held (static outputs: already in peak_allocated_bytes). None: an
    # artifact written before they were read (workers/measure/memory.py).
    graph_pool_bytes: int | None = None
    graph_pool_allocated_bytes: int | None = None
    # CPU: the most bytes of tensors alive at once that one more generation of the measured model allocated above
    # what was alive before it (its weights), as torch's allocator reported them in an untimed pass after the
    # repetitions (workers/measure/memory.py `tensor_peak_bytes`): the same shapes give the same bytes, where the RSS
    # growth varies with what malloc kept. None: a GPU run, or an artifact written before it was measured.
    peak_tensor_bytes: int | None = None

    @property
    def peak_in_use_bytes(self) -> int | None:
        """GPU: the allocated peak plus the graph pools' working space that replays write but never allocate
        (None where the pools were not read: a CPU run, an older artifact)."""
        if self.peak_allocated_bytes is None or self.graph_pool_bytes is None:
            return None
        return self.peak_allocated_bytes + self.graph_pool_bytes - (self.graph_pool_allocated_bytes or 0)


class Energy(Record):
    """Energy of the measured repetitions, from a cumulative device counter read around them."""

    source: Literal["nvml", "rapl"]
    scope: str  # what the counter covers: the whole GPU board, or every CPU package
    joules: float  # over all measured repetitions
    seconds: float  # host wall time between the two readings
    generated_tokens: int  # repetitions x batch x N_out
    # joules / generated tokens; for an extrapolated run, the timed steps' energy scaled like its latency
    joules_per_token: float
    # True: the run timed only its first steps (Samples.extrapolated), so `joules` covers those timed steps and
    # `joules_per_token` is scaled from them. Older artifacts lack the field; the report then reads the samples.
    extrapolated: bool = False


class MeasuredRoofs(Record):
    """The running machine's own roofs, measured in a few seconds by `workers/measure/calibrate.py` (once per worker
    process, device and dtype): what the report's roofline predicts this device's runs against."""

    device: str  # "cpu" or the GPU's name, as in Environment.device
    dtype: str  # the matmul roof is measured in the run's dtype
    threads: int | None = None  # torch intra-op threads (CPU)
    matmul_flops_per_s: float  # best of repeated n x n matmuls
    vector_ops_per_s: float  # elementwise multiply, elements per second
    # Bytes the elementwise multiply streamed (operands and result); None: an older calibration on 65,536
    # elements. On a GPU either is bandwidth-bound, never the vector roof (roofline/measured.py vector_roof).
    vector_bytes: int | None = None
    memory_bandwidth_bytes_per_s: float  # copy of a large tensor: (read + write) bytes per second
    dispatch_s: float  # per-operator floor of an eager decoder: a micro model's forward / its roofline launches
    op_dispatch_s: float | None = None  # a bare ATen op (one-element add), dispatched and completed
    # Host floor per forward: one eager forward of the model that ran (its real layer count, a one-token input,
    # no cache) on the run's device, the best of a few; None where not measured (older artifacts).
    host_floor_s: float | None = None
    host_floor_layers: int | None = None  # the layers of that forward
    memory_bytes: int  # RAM (CPU) or device memory (GPU)
    method: str  # sizes and repetitions, so a reader can judge the numbers
    wall_s: float  # how long the measurement took


class EngineRecord(Record):
    """The engine a run ran in, where it is not PyTorch (specs/engines.py), with the kernel settings that can move a
    near-tied token: a run's quality is scored on its own tokens, under exactly these settings."""

    name: str
    version: str
    flash_attention: bool
    kv_cache_type: str
    threads: int
    gpu_layers: int
    gguf_type: str
    gguf_sha256: str


class Environment(Record):
    """Everything needed to say where a number came from."""

    hostname: str
    platform: str
    python: str
    torch: str | None = None
    transformers: str | None = None
    flash_attn: str | None = None
    cuda: str | None = None
    device: str  # "cpu" or the GPU's name
    gpu_count: int = 0
    driver: str | None = None
    attention_kernel: str | None = None  # the kernel the model actually ran
    dtype: str | None = None
    git_commit: str | None = None
    image_digest: str | None = None
    nvml: dict[str, float | int | str] | None = None  # clocks, temperature, power
    other_gpu_processes: bool | None = None
    cpu_threads: int | None = None
    # The KV cache the generation used: LLaMA "preallocated" (or "static" / "live", the compile variant's), LLaDA
    # "none" (vanilla) or a cached variant's "prefix" / "dual"; "dynamic" is transformers' own.
    # Block diffusion: "block" (the cache of finished blocks, its design) or "block+sub-block" (with the sub-block cache).
    # An engine's own: "llama.cpp" (its decode's cache).
    kv_cache: Literal["preallocated", "dynamic", "static", "live", "none", "prefix", "dual", "block",
                      "block+sub-block", "llama.cpp"] | None = None
    # How a variant's step forward ran when not eagerly: "cuda graph" (captured by hand, replayed),
    # "torch.compile reduce-overhead (cuda graphs)", or "inductor" (a CPU: compiled, no graphs); None: eager.
    forward_capture: str | None = None
    # The attention kernel of LLaMA's compiled decode step (LlamaImpl.decode_attention), in words.
    decode_attention_kernel: str | None = None
    measured_roofs: MeasuredRoofs | None = None  # this machine's roofs in the run's dtype (workers/measure/calibrate.py)
    engine: EngineRecord | None = None  # None: PyTorch


class Generation(Record):
    prompt_id: int
    token_ids: list[int]
    text: str
    useful_tokens: int  # tokens up to the first EOS/EoT; the budget N_out is the config's


class QualityRecord(Record):
    """Quality of one continuation (None where a metric is off)."""

    prompt_id: int
    sample: int | None = None  # which of a prompt's samples (the sampled reference); None for every other text
    bertscore_precision: float | None = None
    bertscore_recall: float | None = None
    bertscore_f1: float | None = None
    nll_per_token: float | None = None
    gen_ppl: float | None = None
    nll_per_token_second: float | None = None  # the same under quality.perplexity.second_evaluator
    gen_ppl_second: float | None = None
    elbo_nll_per_token: float | None = None  # LLaDA's bound: an upper bound on NLL, not a perplexity
    elbo_nll_per_token_stderr: float | None = None  # its Monte-Carlo standard error (per token)
    repeated_bigram_rate: float | None = None
    distinct_1: float | None = None
    distinct_2: float | None = None


class TrainingEvaluation(Record):
    """One held-out evaluation of a training run (miniature/trainer.py)."""

    step: int
    tokens: int
    wall_s: float
    heldout_loss: float
    train_loss: float | None = None


class ModelProvenance(Record):
    """How a checkpoint that ships its training log was made (the miniature pair); None for others."""

    trained_by: str  # "llada-bench train"
    arch: Literal["llama", "llada", "fast_dllm_v2"]  # the block-diffusion member adapted from the AR one
    parameters: int
    steps: int
    tokens_seen: int
    wall_s: float
    heldout_loss_nats: float  # AR: next-token cross-entropy; LLaDA: the masked-diffusion bound (>= NLL); block
    # diffusion: that bound inside blocks given the clean earlier blocks (>= NLL)
    heldout_measure: str
    unigram_entropy_nats: float  # the corpus's unigram entropy: the loss of a context-blind model
    corpus_sha256: str | None = None
    seed: int | None = None
    # The training rule it was trained under, the evaluation it ships (the best held-out loss), and the curve.
    training_rule: str | None = None
    shipped_step: int | None = None
    shipped_tokens: int | None = None
    evaluations: list[TrainingEvaluation] | None = None

    @property
    def learned_beyond_unigram(self) -> bool:
        """Held-out loss clearly (0.25 nats) below the unigram entropy: the model uses context."""
        return self.heldout_loss_nats < self.unigram_entropy_nats - UNIGRAM_MARGIN_NATS


# A model whose held-out loss is within this of the unigram entropy has learned little beyond token
# frequencies: its quality curves would look like findings and mean nothing.
UNIGRAM_MARGIN_NATS = 0.25


class RunResult(Record):
    """One artifact: the config that made it, its status, and everything it measured."""

    schema_version: int = 1
    run_id: str
    sweep: str
    config: RunConfig
    status: RunStatus
    weights: Literal["synthetic", "real"]
    started_at: str
    finished_at: str
    attempts: int = 1
    error: str | None = None
    traceback: str | None = None
    # The error is in the model's files (missing, unreadable, a config.json that contradicts its weights): nothing
    # was measured, so this is no result, and a resume reruns it once the files are fixed.
    input_error: bool = False
    model_load_s: float | None = None  # this actor's load of the model, 0 when already loaded
    samples: Samples | None = None
    memory: Memory | None = None
    environment: Environment | None = None
    # Model forward passes per generation: the schedule's count; where a variant's confidence rule makes it
    # vary, the count of each measured repetition is in samples.forwards.
    nfe: int | None = None
    cache_bytes: int | None = None  # peak bytes the variant's KV cache held (None: no cache)
    # Preparation time of a compile (LLaMA) or graph (LLaDA) variant, spent in the warm-ups and never timed:
    # from each step signature's first call until it has replayed once (workers/measure/preparation.py).
    preparation_s: float | None = None
    generations: list[Generation] = Field(default_factory=list)
    quality: list[QualityRecord] | None = None
    quality_sampled: list[QualityRecord] | None = None  # LLaMA sampled at quality.llama_sampled_temperature
    calibration: dict[str, list[QualityRecord]] | None = None  # "reference", "unrelated"
    quality_note: str | None = None  # e.g. "synthetic weights: quality not meaningful"
    # Scoring raised after a good measurement: the samples are kept, quality is None; error then traceback.
    quality_error: str | None = None
    energy: Energy | None = None  # None where the machine exposes no energy counter
    model_provenance: ModelProvenance | None = None  # checkpoints with a training_log.json (the miniature pair)
    model_shape: ModelShape | None = None  # the architecture the worker loaded (what the roofline costs)

    @property
    def unscored(self) -> bool:
        """Measured, but the quality its spec asks for could not be scored (`quality_error`): the timing stands, the
        run is not done, so `--retry-failed` measures and scores it again and the sweep exits 1."""
        return self.status is RunStatus.OK and self.quality_error is not None

    @property
    def outcome(self) -> str:
        """The status as the sweep reports it: `unscored` for an ok run whose quality could not be scored."""
        return "unscored" if self.unscored else self.status.value

    @model_validator(mode="before")
    @classmethod
    def _read_compile_s(cls, data: Any) -> Any:
        """Artifacts written before `preparation_s` call it `compile_s`; it meant the first call's compilation
        (LLaMA: not the cudagraph recording of its second call) or capture (LLaDA, eager warm-ups included)."""
        if isinstance(data, dict) and "compile_s" in data and "preparation_s" not in data:
            data = {**data, "preparation_s": data["compile_s"]}
            del data["compile_s"]
        return data
