"""A checkpoint whose config.json contradicts its weights is an error of that file, named with the field and the
value the weights hold, never an out-of-memory finding; and a run that failed on its model's files is rerun by a
plain resume once they are fixed (an ordinary error still waits for --retry-failed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from orchestrator.cli import EXIT_RUNS_FAILED, sweep_command
from orchestrator.plan import plan_runs
from orchestrator.store import ArtifactStore
from specs.artifacts import SweepLayout, load_results
from specs.loader import load_spec
from specs.registry import family
from specs.results import RunResult, RunStatus
from specs.schema import ModelSpec
from tests.dream_golden.tiny_checkpoint import VOCAB_SIZE, write_tiny_dream_checkpoint
from tests.spec_fixtures import tiny_spec, write_spec
from tests.sweep_faults import finished_sweep, ok_result, small_spec
from tests.worker_fixtures import (
    TINY,
    one_thread,  # noqa: F401  (a fixture: usefixtures finds it by name)
    run_config,
    write_llada_checkpoint,
)
from workers.errors import CheckpointFormatError
from workers.models.checkpoint import read_config
from workers.models.config_check import check_against_weights
from workers.models.dream_checkpoint import dream_to_qwen2_name, qwen2_config_from_dream
from workers.models.loading import build_on_meta
from workers.runner import Worker

pytestmark = pytest.mark.usefixtures("one_thread")


def llada_checkpoint(directory: Path, **config: object) -> Path:
    """The tiny LLaDA checkpoint (its own naming, sharded, with a tokenizer), its config.json changed by `config`."""
    write_llada_checkpoint(directory, seed=0, shards=2, dtype=torch.float32)
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return directory


def llada_model(directory: Path) -> ModelSpec:
    return ModelSpec(name="llada-ckpt", arch="llada", source={"checkpoint": str(directory)})


@pytest.mark.parametrize(("config", "named"), [
    ({"embedding_size": 10**12}, f"embedding_size is 1000000000000 but the weights hold {TINY['vocab']}"),
    ({"embedding_size": None, "vocab_size": 10**12}, f"vocab_size is 1000000000000 but the weights hold {TINY['vocab']}"),
    ({"n_layers": 40}, f"n_layers is 40 but the weights hold {TINY['n_layers']} (layers 0 to 1)"),
    ({"mlp_hidden_size": 10**9}, f"mlp_hidden_size is 1000000000 but the weights hold {TINY['mlp_hidden_size']}"),
], ids=["embedding_size", "vocab_size", "n_layers", "mlp_hidden_size"])
def test_a_config_that_contradicts_the_weights_is_an_error_of_that_file_not_an_oom(
    tmp_path: Path, config: dict, named: str
) -> None:
    directory = llada_checkpoint(tmp_path / "llada", **config)
    result = Worker().run(run_config("llada", model=llada_model(directory)), sweep="s", run_id="r")
    assert result.status == RunStatus.ERROR, result.error
    assert result.error.startswith(f"CheckpointFormatError: {directory / 'config.json'}: {named}")
    field, value = named.split(" is ")[0], named.split("hold ")[1].split(" ")[0]
    assert f"set {field}: {value}" in result.error  # the fix, with the weights' own value
    assert result.input_error and result.memory is None


def test_a_dream_config_with_a_wrong_vocabulary_is_caught_before_any_memory_is_taken(tmp_path: Path) -> None:
    directory = write_tiny_dream_checkpoint(tmp_path / "dream")
    raw = {**read_config(directory), "vocab_size": 10**12}
    model = build_on_meta(qwen2_config_from_dream(raw), "sdpa", torch.float32, family("dream"))
    with pytest.raises(CheckpointFormatError, match=rf"vocab_size is 1000000000000 but the weights hold {VOCAB_SIZE} "
                       r"\(model\.safetensors: model\.embed_tokens\.weight has shape \[256, 64\]\).*"
                       rf"set vocab_size: {VOCAB_SIZE}"):
        check_against_weights(model, directory, raw, dream_to_qwen2_name)
    assert all(p.is_meta for p in model.parameters())  # nothing was allocated
    consistent = build_on_meta(qwen2_config_from_dream(read_config(directory)), "sdpa", torch.float32, family("dream"))
    check_against_weights(consistent, directory, read_config(directory), dream_to_qwen2_name)


def failed_result(ok: RunResult, *, input_error: bool) -> RunResult:
    return ok.model_copy(update={"status": RunStatus.ERROR, "samples": None, "error": "CheckpointFormatError: ...",
                                 "input_error": input_error})


def test_a_resume_reruns_a_run_that_failed_on_its_files_and_retry_failed_the_others(tmp_path: Path) -> None:
    spec_path = small_spec(tmp_path)
    out = tmp_path / "out"
    planned = finished_sweep(spec_path, out)
    spec = load_spec(spec_path)
    store = ArtifactStore(out)
    store.open(spec, spec_path.read_text())
    on_files, other = planned[0], planned[1]
    store.write_result(failed_result(ok_result(on_files, spec.name), input_error=True))
    store.write_result(failed_result(ok_result(other, spec.name), input_error=False))
    ids = [r.run_id for r in planned]
    assert store.completed(ids) == set(ids) - {on_files.run_id}
    assert store.completed(ids, retry_failed=True) == set(ids) - {on_files.run_id, other.run_id}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_after_the_config_is_fixed_a_plain_rerun_of_the_sweep_measures_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe's case end to end: the wrong config fails its runs (no oom), the fix is picked up without flags."""
    directory = llada_checkpoint(tmp_path / "llada", embedding_size=10**12)
    data = tiny_spec(batch_sizes=[1], generation_lengths=[32], llada={"steps": [16], "block_lengths": [32]})
    data["models"][1] = {"name": "llada-ckpt", "arch": "llada", "source": {"checkpoint": str(directory)}}
    data["controls"].update(warmup=1, repetitions=1)
    spec_path, out = write_spec(tmp_path, data), tmp_path / "out"
    llada_run = next(r.run_id for r in plan_runs(load_spec(spec_path)) if r.config.model.arch == "llada")

    def sweep() -> dict[str, RunResult]:
        sweep_command(str(spec_path), out=out, executor="inline", report=False)
        return {r.run_id: r for r in load_results(SweepLayout(out))}

    first = sweep()[llada_run]
    assert first.status == RunStatus.ERROR and first.input_error and "embedding_size" in first.error
    llada_checkpoint(directory, embedding_size=TINY["vocab"])  # the config fixed
    assert sweep()[llada_run].status == RunStatus.OK
    assert "1 already done, 1 to run" in capsys.readouterr().out
    assert sweep_command(str(spec_path), out=out, executor="inline", report=False) != EXIT_RUNS_FAILED
