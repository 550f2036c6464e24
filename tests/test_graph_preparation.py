"""Preparation (compiling, capturing) happens in the warm-ups and never in a timed repetition; where it would, the
run fails, naming what it would have prepared. LLaDA's window, and so its graphs' shapes, depends on the tokens:
a mask left of the block (here, in one batch's prompt) widens it, batch by batch."""

from __future__ import annotations

import json

import pytest
import torch

from specs.loader import PACKAGE_ROOT
from specs.results import RunResult
from specs.schema import Controls, LladaImpl
from tests.test_sync_free import _model
from tests.worker_fixtures import one_thread, run_config  # noqa: F401 (fixture)
from workers.measure import scenario
from workers.measure.preparation import Preparation, PreparationInTimedRegion
from workers.samplers.graphs import CapturedForward


def test_a_signature_is_prepared_once_and_a_frozen_ledger_refuses_a_new_one() -> None:
    """The first call of a signature is timed into the ledger; inside `frozen()` a known signature replays, a
    new one raises before anything is compiled, naming the forward and its inputs."""
    preparation = Preparation()
    forward = CapturedForward(lambda x: x * 2, torch.device("cpu"), name="doubling", preparation=preparation)
    assert torch.equal(forward(torch.tensor([1.0, 2.0])), torch.tensor([2.0, 4.0]))
    assert preparation.prepared == ["doubling at [2 float32]"] and preparation.seconds > 0
    seconds = preparation.seconds
    with preparation.frozen():
        assert torch.equal(forward(torch.tensor([3.0, 5.0])), torch.tensor([6.0, 10.0]))
    with pytest.raises(PreparationInTimedRegion, match=r"doubling at \[3 float32\] would be compiled or captured"):
        with preparation.frozen():
            forward(torch.tensor([1.0, 2.0, 3.0]))
    assert forward.graphs == 1 and preparation.seconds == seconds
    assert not preparation.is_frozen  # the guard ends with the region, so untimed generations may prepare again


def test_a_compilation_no_forward_announced_fails_the_frozen_region() -> None:
    """A dynamo compilation the forwards' own bookkeeping does not see (a recompilation on a failed guard) is
    caught through dynamo's compilation callbacks: the region raises when it ends."""
    preparation = Preparation()
    compiled = torch.compile(lambda x: x + 1, backend="eager", dynamic=False)
    compiled(torch.ones(2))  # compiled before the region: replays inside it
    with preparation.frozen():
        compiled(torch.ones(2))
    with pytest.raises(PreparationInTimedRegion, match="dynamo"):
        with preparation.frozen():
            compiled(torch.ones(3))  # a new shape: dynamo recompiles


def _batches(mask_id: int) -> list[torch.Tensor]:
    """Two prompt batches of one shape; the second holds a mask in its prompt, so its first block's window
    starts there, 13 positions left of the block: another logits width, another graph."""
    gen = torch.Generator().manual_seed(0)
    plain = torch.randint(1000, 2000, (2, 16), generator=gen)
    masked = torch.randint(1000, 2000, (2, 16), generator=gen)
    masked[1, 3] = mask_id
    return [plain, masked]


def _graph_run_config():  # noqa: ANN202
    config = run_config("llada", batch_size=2, prompt_length=16, generation_length=16,
                        controls=Controls(dtype="float32", device="cpu", warmup=1, repetitions=2))  # fmt: skip
    return config.model_copy(update={"steps": 8, "block_length": 8, "llada_impl": LladaImpl(name="graph", graph=True)})


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_llada_graph_run_warms_up_on_every_batch_its_repetitions_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Repetitions run batches 0 and 1, whose windows differ: the warm-ups cover both (the one configured plus
    one for batch 1), and every signature is prepared before the timed region. With the old rule (one warm-up
    per batch shape) the second repetition would capture inside its timing: the run fails, naming the forward."""
    loaded = _model("llada", "sdpa")
    config = _graph_run_config()
    batches = _batches(loaded.mask_token_id)
    measurement = scenario.measure(loaded, config, batches)
    assert len(measurement.samples.warmup_latency_s) == 2 and measurement.samples.batch_index == [0, 1]
    prepared = measurement.compiled.preparation.prepared
    # Batch 0: the block's 8 logits rows. Batch 1: block 0 widened to the prompt's mask (21 rows), which took one
    # of the block's transfers, so block 1 widens to the mask that block 0 left (15 rows).
    assert all(what.startswith("LLaDA full forward") for what in prepared)
    assert [what.split(", ")[1] for what in prepared] == ["8 int64", "21 int64", "15 int64"]
    assert measurement.preparation_s == measurement.compiled.preparation.seconds > 0

    monkeypatch.setattr(scenario, "_warmup_batches", lambda warmup, repetitions, n, prepared_by: [0])
    with pytest.raises(PreparationInTimedRegion, match=r"LLaDA full forward \(2 rows x 32 positions\) at"):
        scenario.measure(loaded, config, batches)


def test_an_artifact_written_with_compile_s_reads_it_as_preparation_s() -> None:
    """The H200 accel-8b artifacts record their compilation as `compile_s`: they still load, as `preparation_s`."""
    runs = sorted((PACKAGE_ROOT / "results" / "h200" / "accel-8b" / "runs").glob("*.json"))
    docs = [json.loads(path.read_text()) for path in runs]
    compiled = [doc for doc in docs if doc.get("compile_s") is not None]
    assert compiled, "the H200 compile runs are the old artifacts this test reads"
    for doc in compiled:
        result = RunResult.model_validate(doc)
        assert result.preparation_s == doc["compile_s"] and "compile_s" not in result.model_dump()


def test_the_plan_counts_the_warmups_the_scenario_runs() -> None:
    """`plan` prices each run's warm-ups as the scenario chooses them: a LLaDA graph run at B = 1 (8 prompts,
    W = 1, R = 3) warms up on batches 0, 1 and 2; the other runs of campaign-graphs keep their one."""
    import math

    from orchestrator.plan import plan_runs
    from orchestrator.walltime import warmups
    from specs.loader import load_spec
    from workers.measure.scenario import CompiledSteps, _prepared_by, _warmup_batches, uses_compiled_steps

    configs = [r.config for r in plan_runs(load_spec(PACKAGE_ROOT / "specs" / "campaign-graphs.yaml"))]
    counts = {}
    for config in configs:
        n = math.ceil(len(config.prompt_ids) / config.batch_size)
        batches = [torch.zeros((config.batch_size, config.prompt_length), dtype=torch.long)] * n
        compiled = CompiledSteps() if uses_compiled_steps(config) else None
        chosen = _warmup_batches(config.controls.warmup, config.controls.repetitions, n,
                                 _prepared_by(config, batches, compiled))  # fmt: skip
        assert len(chosen) == warmups(config), config
        counts[(config.model.arch, config.llada_impl.graph if config.llada_impl else False, config.batch_size)] = len(chosen)
    assert counts[("llada", True, 1)] == 3 and counts[("llada", True, 64)] == 1 and counts[("llada", False, 1)] == 1


@pytest.mark.slow
def test_a_capture_in_a_timed_repetition_is_an_error_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the worker: with no warm-up to capture in, the first repetition would capture; the artifact is a
    failed run that names the forward, with no samples to publish."""
    from specs.results import RunStatus
    from workers.runner import Worker

    monkeypatch.setattr(scenario, "_warmup_batches", lambda warmup, repetitions, n, prepared_by: [])
    result = Worker().run(_graph_run_config(), sweep="s", run_id="graph")
    assert result.status == RunStatus.ERROR and result.samples is None
    assert "PreparationInTimedRegion" in result.error and "LLaDA full forward" in result.error
