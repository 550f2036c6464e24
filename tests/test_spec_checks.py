"""Specs are never misread, and a spec that can never succeed fails at load time (`plan` included), with one
line naming the field: nothing is left to be found after a model has loaded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli import main
from specs.loader import PACKAGE_ROOT, SpecError, parse_spec
from tests.spec_fixtures import mutated, tiny_dict, write_spec

TINY_TEXT = (PACKAGE_ROOT / "specs" / "tiny.yaml").read_text(encoding="utf-8")
MINIATURE = PACKAGE_ROOT / "models" / "miniature"


def plan_error(path: Path, capsys) -> str:
    """`llada-bench plan`: exit 2 and one line, no traceback; the line's text after the file name."""
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: "), err
    return err.removeprefix("error: ").strip()


# ---------------------------------------------------------------- misread specs


@pytest.mark.parametrize("edit, expected", [
    # a second block of the same key would silently replace the first
    (lambda t: t + "controls:\n  seed: 7\n", "controls: given twice (lines 19 and 33)"),
    (lambda t: t.replace("  seed: 0\n", "  seed: 0\n  seed: 1\n"), "controls.seed: given twice"),
    (lambda t: t.replace("warmup: 2", "warmup: yes"), "controls.warmup: Input should be a valid integer (got True)"),
    (lambda t: t.replace("repetitions: 3", "repetitions: true"), "controls.repetitions: Input should be a valid integer"),
    (lambda t: t.replace("batch_sizes: [1, 4]", "batch_sizes: [1, true]"), "grid.batch_sizes.1: Input should be a valid integer"),
    (lambda t: t.replace("temperature: 0.0", "temperature: .inf"), "controls.temperature: Input should be a finite number"),
    (lambda t: t.replace("temperature: 0.0", "temperature: .nan"), "controls.temperature: Input should be a finite number"),
    (lambda t: t.replace("block_lengths: [32]", "block_lengths: [32]\n    cfg_scales: [.inf]"),
     "grid.llada.cfg_scales.0: Input should be a finite number"),
    (lambda t: t.replace("llama_sampled_temperature: 1.0", "llama_sampled_temperature: .inf"),
     "quality.llama_sampled_temperature: Input should be a finite number"),
    (lambda t: t.replace("name: tiny\n", 'name: "tiny\\n"\n'), "name: 'tiny\\n' is not a safe name"),
    (lambda t: t.replace("  - name: llama-tiny\n", '  - name: "llama-tiny\\n"\n'), "models.0.name: 'llama-tiny\\n' is not a safe name"),
], ids=["repeated block", "repeated key", "yes as int", "true as int", "true in a list", "inf temperature",
        "nan temperature", "inf cfg", "inf sampled temperature", "name with newline", "model name with newline"])
def test_a_spec_is_never_misread(tmp_path: Path, capsys, edit: Callable[[str], str], expected: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(edit(TINY_TEXT), encoding="utf-8")
    assert expected in plan_error(path, capsys)


def test_yaml_merge_keys_still_override() -> None:
    """`<<:` then a key of the block's own is how YAML overrides; it is not a repeated key."""
    text = TINY_TEXT.replace("controls:\n", "controls:\n  <<: {seed: 3, warmup: 1, max_retries: 4}\n", 1)
    spec = parse_spec(text, source="t.yaml")
    assert (spec.controls.seed, spec.controls.warmup, spec.controls.max_retries) == (0, 2, 4)


# ---------------------------------------------------------------- specs that can never succeed


def spec_file(tmp_path: Path, mutate: Callable[[dict[str, Any]], object]) -> Path:
    return write_spec(tmp_path, mutated(mutate))


def checkpoint(tmp_path: Path, arch: str, edit: Callable[[dict[str, Any]], object] | None = None,
               drop: tuple[str, ...] = ()) -> Path:
    """A folder shaped like a shipped miniature checkpoint (weights linked, not copied), config edited."""
    directory = tmp_path / f"ckpt-{arch}"
    directory.mkdir(parents=True)
    for source in (MINIATURE / arch).iterdir():
        if source.name in drop:
            continue
        if source.name == "config.json":
            config = json.loads(source.read_text())
            if edit:
                edit(config)
            (directory / "config.json").write_text(json.dumps(config))
        else:
            (directory / source.name).symlink_to(source)
    return directory


def use_checkpoint(directory: Path, index: int = 0, **extra: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        d["models"][index].update(source={"checkpoint": str(directory)}, **extra)
        d["grid"].update(generation_lengths=[32])  # the miniature models hold 128 positions

    return mutate


def write_prompts(tmp_path: Path, text: str, name: str = "prompts.txt") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_prompt_files_that_cannot_supply_the_runs(tmp_path: Path, capsys) -> None:
    cases = {
        write_prompts(tmp_path, "", "empty.txt"): "holds no passages",
        write_prompts(tmp_path, "\n\n  \n", "blank.txt"): "holds no passages",
        str(tmp_path / "missing.txt"): "prompts.dataset: no such file",
        write_prompts(tmp_path, "too short a passage\n\nand another\n", "short.txt"): "prompts.count:",
        write_prompts(tmp_path, (" ".join(["word"] * 200) + "\n\n") * 3, "three.txt"):
            "has only 3 passages of at least 96 words",
    }
    (tmp_path / "dir.txt").mkdir()
    cases[str(tmp_path / "dir.txt")] = "is a directory"
    for dataset, expected in cases.items():
        path = spec_file(tmp_path, lambda d, dataset=dataset: d["prompts"].update(dataset=dataset))
        line = plan_error(path, capsys)
        assert expected in line, (dataset, line)
        assert "prompts." in line


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["quality"]["perplexity"].update(evaluator="./models/no-such-evaluator"),
     "quality.perplexity.evaluator: no such directory './models/no-such-evaluator'"),
    (lambda d: d["quality"]["bertscore"].update(model="/no/such/scorer"), "quality.bertscore.model: no such directory"),
    (lambda d: d["quality"]["bertscore"].update(num_layers=7),
     "quality.bertscore.num_layers: 7 is outside the 6 layers of 'packaged-minilm'; allowed: 1..6"),
    (lambda d: d["models"][1].update(mask_token_id=40000),
     "models.1.mask_token_id: 40000 is outside the synthetic tokenizer's 30522 tokens"),
    (lambda d: d["models"][0]["source"].update(synthetic={
        "hidden_size": 64, "num_layers": 1, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 64,
        "vocab_size": 1000}),
     "models.0.source.synthetic.vocab_size: 1000 is smaller than the synthetic tokenizer's 30522 tokens"),
    (lambda d: d["controls"].update(hardware={"gpu": "A100"}),
     "controls.hardware.gpu: 'A100' needs a GPU but device is 'cpu'"),
    (lambda d: d["controls"].update(hardware={"profile": "a100-sxm9"}),
     "controls.hardware.profile: unknown hardware 'a100-sxm9'; allowed:"),
    (lambda d: d["grid"].update(batch_sizes=[1, 4, 1]), "grid.batch_sizes: 1 is listed twice; list each value once"),
    (lambda d: d["grid"]["llada"].update(steps=[8, 16, 8]), "grid.llada.steps: 8 is listed twice"),
    (lambda d: d["grid"]["llada"].update(cfg_scales=[0, 0.0]), "grid.llada.cfg_scales: 0.0 is listed twice"),
], ids=["evaluator dir", "scorer dir", "scorer layers", "synthetic mask", "synthetic vocab", "gpu on cpu",
        "unknown profile", "repeated batch", "repeated steps", "repeated cfg"])
def test_settings_that_can_never_run(tmp_path: Path, capsys, mutate, expected: str) -> None:
    assert expected in plan_error(spec_file(tmp_path, mutate), capsys)


def test_checkpoints_checked_without_loading_them(tmp_path: Path, capsys) -> None:
    cases = [
        (use_checkpoint(checkpoint(tmp_path / "a", "llama", drop=("config.json",))), "has no config.json"),
        (use_checkpoint(checkpoint(tmp_path / "b", "llama", lambda c: c.update(vocab_size=1000))),
         "the tokenizer has 4099 tokens but the model's vocabulary has 1000"),
        (use_checkpoint(checkpoint(tmp_path / "c", "llada", lambda c: c.update(mask_token_id=5000)), index=1),
         "models.1.source.checkpoint (config.json mask_token_id): 5000 is outside the model's vocabulary of 4099 ids"),
        (use_checkpoint(checkpoint(tmp_path / "d", "llada"), index=1, mask_token_id=4099),
         "models.1.mask_token_id: 4099 is outside the model's vocabulary of 4099 ids; allowed: 0..4098"),
        (use_checkpoint(checkpoint(tmp_path / "e", "llada")), "is a llada checkpoint (model_type 'llada'); give it arch: llada"),
        (use_checkpoint(checkpoint(tmp_path / "f", "llama", lambda c: c.update(model_type="gpt2"))),
         "has model_type 'gpt2', which arch llama loads only with the checkpoint's own code (without it: 'llama'); "
         "set source.trust_remote_code: true"),
        (use_checkpoint(checkpoint(tmp_path / "g", "llama", drop=("model.safetensors",))), "has no model.safetensors"),
        (use_checkpoint(checkpoint(tmp_path / "h", "llama", drop=("tokenizer.json", "tokenizer_config.json"))),
         "has no tokenizer files"),
        (use_checkpoint(MINIATURE / "llama" / "config.json"), "is a file; give the checkpoint's directory"),
    ]
    for index, (mutate, expected) in enumerate(cases):
        (tmp_path / str(index)).mkdir()
        line = plan_error(spec_file(tmp_path / str(index), mutate), capsys)
        assert expected in line, line


def as_dream_checkpoint(source: Path) -> Callable[[dict[str, Any]], None]:
    """models.1 becomes a Dream model read from `source` (the grid's LLaDA axes become Dream's; quality off)."""
    def mutate(d: dict[str, Any]) -> None:
        d["models"][1] = {"name": "dream-ckpt", "arch": "dream", "source": {"checkpoint": str(source)}}
        d["grid"].pop("llada")
        d["grid"].update(dream={"steps": [16]}, generation_lengths=[32])
        d.pop("quality")

    return mutate


@pytest.mark.parametrize(("config", "expected"), [
    ({"hidden_size": 8}, "has a config.json with no model_type, so it names no architecture (a Dream checkpoint's "
                         "says 'Dream'): give the checkpoint's own config.json"),
    ({"model_type": "gpt2"}, "has model_type 'gpt2', which arch dream does not load (allowed: 'Dream'); give a Dream "
                             "checkpoint: Dream models never run remote code"),
], ids=["no model_type", "unknown model_type"])
def test_a_diffusion_checkpoint_is_never_told_to_trust_remote_code(
    tmp_path: Path, capsys, config: dict[str, Any], expected: str
) -> None:
    """The Dream family refuses source.trust_remote_code, so the advice must be another one."""
    (tmp_path / "dream").mkdir()
    (tmp_path / "dream" / "config.json").write_text(json.dumps(config))
    line = plan_error(spec_file(tmp_path, as_dream_checkpoint(tmp_path / "dream")), capsys)
    assert f"models.1.source.checkpoint: '{tmp_path / 'dream'}' {expected}" in line
    assert "trust_remote_code" not in line


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_a_broken_link_as_a_checkpoint_says_what_it_is(tmp_path: Path, capsys, link: str) -> None:
    path = tmp_path / "ckpt"
    path.symlink_to(path if link == "loop" else tmp_path / "gone")
    line = plan_error(spec_file(tmp_path, use_checkpoint(path)), capsys)
    said = ("is a symlink loop (following it leads back to itself)" if link == "loop"
            else f"is a symlink to '{tmp_path / 'gone'}', which does not exist")
    assert f"models.0.source.checkpoint: '{path}' {said}; point it at the directory" in line
    assert "no such directory" not in line


def test_real_checkpoints_and_hub_ids_pass(tmp_path: Path, capsys) -> None:
    """The shipped miniature pair (both formats) passes; a hub id cannot be checked offline and is left."""
    def both(d: dict[str, Any]) -> None:
        use_checkpoint(MINIATURE / "llama", 0)(d)
        use_checkpoint(MINIATURE / "llada", 1, mask_token_id=1)(d)
        d["quality"]["perplexity"].update(evaluator="meta-llama/Meta-Llama-3-8B")

    assert main(["plan", str(spec_file(tmp_path, both))]) == 0
    assert "runs planned" in capsys.readouterr().out
    assert main(["plan", "specs/smoke.yaml"]) == 0


def test_load_time_checks_never_load_a_model() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from specs.loader import load_spec\n"
        "from orchestrator.plan import plan_runs\n"
        "plan_runs(load_spec('specs/smoke.yaml'))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'safetensors')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_sweep_refuses_before_it_makes_its_directory(tmp_path: Path, capsys) -> None:
    path = spec_file(tmp_path, lambda d: d["controls"].update(hardware={"profile": "a100-sxm9"}))
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "controls.hardware.profile: unknown hardware" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_tiny_spec_still_loads() -> None:
    assert parse_spec(TINY_TEXT, source="tiny.yaml").name == "tiny"
    with pytest.raises(SpecError):
        parse_spec(TINY_TEXT.replace("seed: 0", "seed: '0'"), source="tiny.yaml")
    assert tiny_dict()["name"] == "tiny"
