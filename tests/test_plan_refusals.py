"""`plan` refuses what `sweep` would refuse: prompt datasets that are neither a file nor a hub id, and a batch
no device could hold. One line naming the field, exit 2, before any run."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.feasibility import MEASURABLE_OVERSHOOT
from specs.engines import LLAMA_CPP, engine_missing
from specs.paths import PACKAGE_ROOT
from tests.spec_fixtures import tiny_dict, tiny_spec, write_spec


def _refusal(command: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("dataset, expected", [
    ("specs/data/no-such-prompts.txt", "prompts.dataset: no such file 'specs/data/no-such-prompts.txt'"),
    ("specs/data/prompts.text", "prompts.dataset: 'specs/data/prompts.text' is neither a local prompt file"),
    ("specs/data", "prompts.dataset: 'specs/data' is a directory"),
    ("owner/name/extra", "nor a hub dataset id (name or owner/name)"),
], ids=["missing", "mistyped ending", "directory", "three parts"])  # fmt: skip
def test_plan_refuses_a_prompt_dataset_sweep_could_not_read(
    dataset: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_dict()
    data["prompts"]["dataset"] = dataset
    assert expected in _refusal(["plan", str(write_spec(tmp_path, data))], capsys)


def test_a_hub_id_still_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tiny_dict()
    data["prompts"]["dataset"] = "Salesforce/wikitext"
    assert main(["plan", str(write_spec(tmp_path, data))]) == 0


@pytest.mark.parametrize("command", ["plan", "sweep"])
def test_a_batch_far_beyond_the_devices_memory_is_refused_with_both_sizes(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the CPU the device is this machine's RAM; the message gives the prediction and the memory."""
    path = write_spec(tmp_path, tiny_spec(batch_sizes=[1, 10**9]))
    args = [command, str(path)] + (["--out", str(tmp_path / "out")] if command == "sweep" else [])
    err = _refusal(args, capsys)
    assert f"error: {path}: grid.batch_sizes: batch 1000000000 of " in err  # the file, as every load-time error
    assert "GiB (the roofline's memory model) on this machine's RAM, which has " in err
    assert f"beyond {MEASURABLE_OVERSHOOT:g}x the device's memory" in err
    assert not (tmp_path / "out" / "runs").exists()  # refused before any run


@pytest.mark.parametrize(("shape", "field", "fix"), [
    ({"vocab_size": 10**12}, "vocab_size", "its embedding and LM head (1,000,000,000,000 x 64) hold most of them; "
                                           "lower the shape's vocab_size"),
    ({"num_layers": 10**8}, "num_layers", "its 100000000 layers hold most of them"),
], ids=["vocabulary", "layers"])
def test_a_shape_too_large_at_any_batch_is_blamed_not_the_batch_size(
    shape: dict, field: str, fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_spec(batch_sizes=[1])
    data["models"][1]["source"] = {"synthetic": {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 4,
                                                 "intermediate_size": 128, "vocab_size": 30522, **shape}}
    path = write_spec(tmp_path, data)
    err = _refusal(["plan", str(path)], capsys)
    assert f"error: {path}: models.1.source.synthetic.{field}: the weights of llada-tiny alone are predicted " in err
    assert "so no batch size can run" in err and fix in err
    assert "batch_sizes" not in err and "lower the batch" not in err


def test_on_a_profile_the_refusal_names_the_profile_and_a_batch_near_the_wall_still_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_spec(batch_sizes=[1])
    data["controls"].update(device="auto", hardware={"profile": "h100-sxm"})
    assert main(["plan", str(write_spec(tmp_path, data))]) == 0
    data["grid"]["batch_sizes"] = [10**9]
    assert "on profile h100-sxm, which has 80.0 GiB" in _refusal(["plan", str(write_spec(tmp_path, data))], capsys)


def test_every_shipped_spec_passes_the_memory_check(capsys: pytest.CaptureFixture[str]) -> None:
    for spec in sorted((PACKAGE_ROOT / "specs").glob("*.yaml")):
        code, err = main(["plan", str(spec)]), capsys.readouterr().err
        if code and engine_missing(LLAMA_CPP) and "`just engine`" in err:
            continue  # a spec that needs the engine where it is not built: refused in one line saying how to build it
        assert code == 0, (spec.name, err)
