"""The worker's single entry point: run one RunConfig on this machine and return one RunResult, never raising.

A Worker lives as long as its session's process (a Ray actor, or the inline executor's child) and keeps every
model it loads resident (workers/residency.py), so a sweep that interleaves the compared models loads each once
per session. Failures are data (DESIGN "Execution"): a CUDA
out-of-memory becomes `status: oom` with the memory held when it struck, any other exception
`status: error` with its traceback, a hardware mismatch `status: refused`; after each the worker frees
what the run allocated and is ready for the next run. A CUDA error that leaves the context unusable
(an illegal address, a device-side assert) sets `Worker.broken`: every later CUDA call would fail, so
the caller must end this process and retry the run in a fresh one (orchestrator/actor.py does).

Only the measured model is on the device while it is measured: the other resident models (the perplexity
evaluator among them) wait on the host and the BERTScore models are dropped before the measurement, and come back
for scoring or for their own runs, so every model's peak memory, OOM wall and activation estimate describe that
model alone. Quality is scored
after the measurement; a failure there keeps the measurement and sets `quality_error`.
"""

from __future__ import annotations

import gc
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from specs.registry import is_diffusion
from specs.results import Environment, Generation, Memory, ModelProvenance, RunResult, RunStatus
from specs.schema import Controls, ModelSpec, RunConfig
from workers.engine import TORCH, RunEngine, open_engine
from workers.environment import capture_environment
from workers.errors import CheckpointFilesError, SpecMismatchError, WorkerError
from workers.hardware import check_hardware, configure_threads, device_unusable, resolve_device
from workers.measure.calibrate import measured_roofs, with_host_floor
from workers.measure.memory import free_device_memory, memory_at_failure
from workers.measure.scenario import CompiledSteps, batch_seed, generate_untimed, measure
from workers.models.loading import LoadedModel, load_model, shape_of_config
from workers.models.sdpa_backends import NO_CUDNN, eager_llama_decode, without_cudnn_attention
from workers.models.tokenization import decode_generation, model_input_ids
from workers.prompts import PromptExample, check_prompt_supply, load_prompt_examples, prompt_batches
from workers.residency import ModelKey, ResidentModels, model_key

SYNTHETIC_QUALITY_NOTE = "synthetic weights: quality not meaningful"
# RuntimeErrors that are an allocation failure: the CPU allocator's, and CUDA's as some kernels report it
# (cuBLAS fails its handle or workspace allocation with CUBLAS_STATUS_ALLOC_FAILED when the device is full).
_OOM_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory", "cublas_status_alloc_failed")

# torch.OutOfMemoryError is the device-agnostic name (torch >= 2.5); torch.cuda's is the same class there.
_OOM_TYPES: tuple[type[BaseException], ...] = tuple(
    {t for t in (getattr(torch, "OutOfMemoryError", None), torch.cuda.OutOfMemoryError) if t is not None}
)

def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, or a RuntimeError that says an allocation failed (CPU allocator, some kernels)."""
    if isinstance(exc, _OOM_TYPES):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in _OOM_MESSAGES)


@dataclass
class _Progress:
    """What a run has established so far; a failed run's result keeps it."""

    device: torch.device | None = None
    environment: Environment | None = None
    model_load_s: float | None = None
    weights_bytes: int = 0
    provenance: ModelProvenance | None = None


class Worker:
    """Keeps the models it loads (and the scorers) resident between runs; `budget_bytes` bounds the resident
    weights (None: a share of the host's memory, workers/residency.py)."""

    def __init__(self, budget_bytes: int | None = None) -> None:
        self._resident = ResidentModels(budget_bytes)
        self._load_counts: dict[str, int] = {}
        self._scorer: Any | None = None  # workers.quality.QualityScorer, imported on first use
        self._scorer_device: torch.device | None = None
        self._examples: dict[tuple[Any, ...], list[PromptExample]] = {}
        self._engines: dict[tuple[str, ...], RunEngine] = {}  # engines other than PyTorch, by model and dtype
        self.broken: str | None = None  # set when a CUDA error left the device unusable in this process
        configure_threads()
        # The ~380k objects torch and transformers leave at import never become garbage, yet every run's two
        # collections (free_device_memory, the memory tracker) scanned them all: half a second a run on a 2-core
        # machine. Frozen (after a last collection, so no garbage is frozen with them), they are skipped; everything
        # made from here on (models, tensors) is collected as before.
        gc.collect()
        gc.freeze()

    @property
    def load_counts(self) -> dict[str, int]:
        """Model name -> how many times this worker has loaded it (runs of a resident model add nothing)."""
        return dict(self._load_counts)

    # ------------------------------------------------------------ the entry point

    def run(self, config: RunConfig, *, sweep: str, run_id: str, attempt: int = 1) -> RunResult:
        started = _now()
        progress = _Progress()
        failure: dict[str, Any] | None = None
        try:
            fields = self._run(config, progress)
        except Exception as exc:  # failures are data: the sweep goes on
            failure = self._describe_failure(exc, progress)
            traceback.clear_frames(exc.__traceback__)  # release the tensors the failed frames hold
        if failure is not None:
            self._recover(progress)
            fields = failure
        if fields.get("status") == RunStatus.ERROR or fields.get("quality_error"):
            self._check_device(progress.device)
        return RunResult(
            run_id=run_id,
            sweep=sweep,
            config=config,
            weights="synthetic" if config.model.is_synthetic else "real",
            started_at=started,
            finished_at=_now(),
            attempts=attempt,
            environment=progress.environment,
            model_load_s=progress.model_load_s,
            model_provenance=progress.provenance,
            **fields,
        )

    def _run(self, config: RunConfig, progress: _Progress) -> dict[str, Any]:
        configure_threads()
        try:
            device = resolve_device(config.controls)
        except SpecMismatchError as exc:  # asked for a GPU this machine does not have: wrong hardware
            progress.environment = capture_environment(torch.device("cpu"), dtype=config.controls.dtype)
            return {"status": RunStatus.REFUSED, "error": str(exc)}
        progress.device = device
        environment = capture_environment(device, dtype=config.controls.dtype)
        progress.environment = environment
        verdict = check_hardware(config.controls.hardware, environment.device, environment.other_gpu_processes)
        if verdict.refusal is not None:
            return {"status": RunStatus.REFUSED, "error": verdict.refusal}
        # Before any model loads: a run whose prompts cannot be cut must not cost a 16 GB load first.
        check_prompt_supply(config.prompts, config.sequence_length, max(config.prompt_ids) + 1)

        loaded = self._ensure_model(config, device, progress)
        progress.provenance = loaded.provenance
        kernel = loaded.attention_kernel + (f" ({NO_CUDNN})" if eager_llama_decode(config, device) else "")
        progress.environment = environment.model_copy(
            update={"attention_kernel": kernel, "dtype": str(loaded.dtype).removeprefix("torch."),
                    "measured_roofs": with_host_floor(measured_roofs(device, loaded.dtype), loaded.model, device)}
        )
        examples = self._prompt_examples(config, loaded)
        batches = prompt_batches(examples, config.batch_size)
        inputs = [
            model_input_ids(loaded.tokenizer, [e.prompt_ids for e in batch], config.model.chat, device) for batch in batches
        ]
        _check_positions(loaded, inputs[0].shape[1] + config.generation_length)

        engine = self._engine(config, loaded)
        self._park_unmeasured(loaded)
        with without_cudnn_attention(config, device):
            measurement = measure(loaded, config, inputs, engine)
        progress.environment = progress.environment.model_copy(update={
            "kv_cache": measurement.kv_cache, "forward_capture": measurement.forward_capture,
            "decode_attention_kernel": measurement.decode_attention_kernel, "engine": engine.record(),
            "attention_kernel": engine.attention_kernel(progress.environment.attention_kernel),
        })  # fmt: skip
        result: dict[str, Any] = {
            "status": RunStatus.OK,
            "samples": measurement.samples,
            "memory": measurement.memory,
            "energy": measurement.energy,
            "nfe": measurement.nfe,
            "cache_bytes": measurement.cache_bytes,
            "preparation_s": measurement.preparation_s,
            "model_shape": shape_of_config(loaded.model.config),
        }
        result["generations"] = self._generations(loaded, examples, config.batch_size, measurement.outputs)
        if config.quality.enabled:
            try:
                with without_cudnn_attention(config, device):
                    result.update(self._score(config, loaded, examples, inputs, measurement.outputs,
                                              measurement.compiled, engine))
            except Exception as exc:  # the measurement is good: keep it, and say that scoring failed
                result.update(self._quality_failure(exc, loaded))
                traceback.clear_frames(exc.__traceback__)
        return result

    def _quality_failure(self, exc: Exception, loaded: LoadedModel) -> dict[str, Any]:
        """Result fields of a run measured well but not scored: quality None, the error kept (one line when a user
        can fix it, a judge or scorer that cannot be had; else with its traceback), memory freed."""
        error = f"{type(exc).__name__}: {exc}"
        note = f"quality failed: {error.splitlines()[0]}"
        if loaded.weights == "synthetic":
            note = f"{SYNTHETIC_QUALITY_NOTE}; {note}"
        try:
            free_device_memory(loaded.device)
        except Exception:
            pass
        if not isinstance(exc, WorkerError):
            error += "\n" + "".join(traceback.format_exception(exc))
        return {"quality_error": error, "quality_note": note}

    def _park_unmeasured(self, measured: LoadedModel) -> None:
        """Drop the BERTScore models (the scorer reloads them on demand), so the measured model is alone on its
        device: `_ensure_model` has moved the other resident models to the host already."""
        if measured.device.type == "cpu":
            return  # the CPU tracker measures RSS growth over the region, which resident models do not change
        if self._scorer is not None:
            self._scorer.release()
        free_device_memory(measured.device)

    def _score(
        self,
        config: RunConfig,
        loaded: LoadedModel,
        examples: list[PromptExample],
        inputs: list[torch.Tensor],
        outputs: dict[int, torch.Tensor],
        compiled: CompiledSteps | None = None,
        engine: RunEngine = TORCH,
    ) -> dict[str, Any]:
        """Generations of every prompt and their quality, after (never inside) the measurement, in the run's engine;
        the compile variant's generations reuse the measurement's compiled steps."""
        # Quality needs every prompt once: reuse the measured repetitions, generate the rest untimed,
        # each batch with its own seed so a sampled batch gives the same tokens as when it was measured.
        seed, temperature = config.controls.seed, config.controls.temperature
        for b, batch in enumerate(inputs):
            if b not in outputs:
                outputs[b] = generate_untimed(
                    loaded, config, batch, seed=batch_seed(seed, b), temperature=temperature, compiled=compiled,
                    engine=engine,
                )
        generations = self._generations(loaded, examples, config.batch_size, outputs)
        sampled = None
        sampled_temperature = config.quality.llama_sampled_temperature
        if not is_diffusion(config.model.arch) and sampled_temperature is not None and engine.samples:
            from workers.quality.sampled import sampled_generations

            sampled = sampled_generations(
                loaded, config, examples, lambda ex, out, size: self._generations(loaded, list(ex), size, out),
                temperature=sampled_temperature,
            )
        device = loaded.device
        outcome = self._quality_scorer(device).score_run(
            config, examples, generations, model=loaded, sampled=sampled,
            load_evaluator=lambda spec: self._evaluator(config, spec, device),
        )  # fmt: skip
        note = outcome.note
        if loaded.weights == "synthetic":
            note = SYNTHETIC_QUALITY_NOTE + (f"; {note}" if note else "")
        return {
            "generations": generations,
            "quality": outcome.quality,
            "quality_sampled": outcome.quality_sampled,
            "calibration": outcome.calibration,
            "quality_note": note,
        }

    # ------------------------------------------------------------ models

    def _engine(self, config: RunConfig, loaded: LoadedModel) -> RunEngine:
        """The run's engine for its model, opened once per worker (llama.cpp: converted and loaded on first use)."""
        key = (config.engine, loaded.spec.name, config.controls.dtype, str(loaded.device))
        if key not in self._engines:
            self._engines[key] = open_engine(config, loaded)
        return self._engines[key]

    def _ensure_model(self, config: RunConfig, device: torch.device, progress: _Progress) -> LoadedModel:
        """The run's model, alone on the device: resident already, or loaded now (never evicting the run's
        evaluator to make room)."""
        judges = (config.evaluator, config.second_evaluator)
        keep = [model_key(m, config.controls, device) for m in (config.model, *judges) if m is not None]
        loaded, load_s = self._resident_model(config.model, config.controls, device, alone=True, keep=keep)
        progress.model_load_s = load_s
        progress.weights_bytes = loaded.weights_bytes
        return loaded

    def _evaluator(self, config: RunConfig, spec: ModelSpec, device: torch.device) -> LoadedModel:
        """The perplexity evaluator, on the device beside the run's model for scoring."""
        keep = [model_key(m, config.controls, device) for m in (config.model, config.evaluator,
                                                                 config.second_evaluator, spec) if m is not None]
        return self._resident_model(spec, config.controls, device, alone=False, keep=keep)[0]

    def _resident_model(
        self, spec: ModelSpec, controls: Controls, device: torch.device, *, alone: bool, keep: list[ModelKey]
    ) -> tuple[LoadedModel, float]:
        """A resident model (load time 0), or the model loaded now and made resident."""
        key = model_key(spec, controls, device)
        loaded = self._resident.use(key, alone=alone)
        if loaded is not None:
            return loaded, 0.0
        loaded, seconds = self._load(spec, controls, device, reload=self._resident.was_evicted(key))
        for note in self._resident.add(key, loaded, keep=keep):
            print(note, flush=True)
        return loaded, seconds

    def _load(
        self, spec: ModelSpec, controls: Controls, device: torch.device, *, reload: bool = False
    ) -> tuple[LoadedModel, float]:
        """Load a model and say so in one line (a reload says why): transformers' per-tensor bar, printed by every
        worker (actor) for every load, would bury the sweep's own progress."""
        hf_logging.disable_progress_bar()
        start = time.perf_counter()
        loaded = load_model(spec, controls, device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self._load_counts[spec.name] = self._load_counts.get(spec.name, 0) + 1
        seconds = time.perf_counter() - start
        verb = "reloaded" if reload else "loaded"
        why = " (evicted earlier to keep the resident models within the memory budget)" if reload else ""
        print(f"{verb} {spec.name} ({loaded.weights_bytes / 2**20:.3g} MiB of {loaded.weights} weights) on {device} "
              f"in {seconds:.1f} s{why}", flush=True)
        return loaded, seconds

    def _quality_scorer(self, device: torch.device) -> Any:
        if self._scorer is None or self._scorer_device != device:
            from workers.quality import QualityScorer  # lazy: scorer models load only for quality runs

            self._scorer, self._scorer_device = QualityScorer(device), device
        return self._scorer

    # ------------------------------------------------------------ prompts and outputs

    def _prompt_examples(self, config: RunConfig, loaded: LoadedModel) -> list[PromptExample]:
        key = (config.prompts, loaded.tokenizer.name_or_path, config.prompt_length, config.generation_length, tuple(config.prompt_ids))
        if key not in self._examples:
            self._examples[key] = load_prompt_examples(
                config.prompts, loaded.tokenizer, config.prompt_length, config.generation_length, config.prompt_ids
            )
        return self._examples[key]

    @staticmethod
    def _generations(
        loaded: LoadedModel, examples: list[PromptExample], batch_size: int, outputs: dict[int, torch.Tensor]
    ) -> list[Generation]:
        """One Generation per example whose batch ran (example i is row i mod B of batch i // B)."""
        generations = []
        for i, example in enumerate(examples):
            b, row = divmod(i, batch_size)
            if b not in outputs:
                continue
            ids = outputs[b][row].tolist()
            text, useful = decode_generation(loaded.tokenizer, ids, loaded.eos_token_ids)
            generations.append(Generation(prompt_id=example.prompt_id, token_ids=ids, text=text, useful_tokens=useful))
        return generations

    # ------------------------------------------------------------ failures

    def _describe_failure(self, exc: Exception, progress: _Progress) -> dict[str, Any]:
        """The result fields of a failed run; memory is read before anything is freed."""
        oom = is_out_of_memory(exc)
        fields: dict[str, Any] = {
            "status": RunStatus.OOM if oom else RunStatus.ERROR,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(exc)),
            "input_error": isinstance(exc, CheckpointFilesError),
        }
        if oom and progress.device is not None:
            try:
                fields["memory"] = memory_at_failure(progress.device, progress.weights_bytes)
            except Exception:  # the device itself is unusable: keep the status, skip the numbers
                fields["memory"] = Memory(device="cuda" if progress.device.type == "cuda" else "cpu", weights_bytes=progress.weights_bytes)
        return fields

    def _check_device(self, device: torch.device | None) -> None:
        """After an error on a GPU, find out whether the CUDA context still works; if not, mark the worker."""
        if device is None or device.type != "cuda" or self.broken is not None:
            return
        problem = device_unusable(device)
        if problem is not None:
            self.broken = problem

    def _recover(self, progress: _Progress) -> None:
        """Free what the failed run allocated so the next run starts clean (a half-loaded model was never made
        resident, so it is dropped with the rest)."""
        if progress.device is not None:
            try:
                free_device_memory(progress.device)
            except Exception:
                pass


def _check_positions(loaded: LoadedModel, total: int) -> None:
    """Prompt (with template) + generation must fit the model's positions; RoPE past them is extrapolation."""
    limit = getattr(loaded.model.config, "max_position_embeddings", None)
    if limit is not None and total > limit:
        raise SpecMismatchError(
            f"grid: {total} tokens (prompt with its template + generation) exceed {loaded.spec.name!r}'s "
            f"max_position_embeddings {limit}; use shorter lengths"
        )
