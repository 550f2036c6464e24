"""Fast-dLLM v2 in a spec and on disk: its axes plan one run per block, sub-block, threshold and variant with the
fixed schedule's K as steps; what it cannot run is refused naming the field; its official checkpoint format loads
without remote code, the mask and stop ids taken from the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from orchestrator.plan import plan_runs
from specs.block_diffusion import BlockDiffusionSampling, schedule
from specs.loader import SpecError
from specs.schema import Controls, ModelSpec, Prompts, QualitySpec, RunConfig
from tests.fast_dllm_golden.tiny_checkpoint import MASK_ID, STOP_ID, write_tiny_fast_dllm_checkpoint
from tests.fast_dllm_models import golden, run_golden_case
from tests.spec_fixtures import mutated, spec_from
from workers.errors import CheckpointFormatError
from workers.models.dream_model import is_dream_bidirectional
from workers.models.fast_dllm_checkpoint import fast_dllm_mask_token_id, qwen2_config_from_fast_dllm
from workers.models.loading import load_model

AXES = {"thresholds": [1.0, 0.9], "block_lengths": [8], "sub_block_lengths": [4, 8],
        "impl": [{"name": "vanilla"}, {"name": "subcache", "sub_block_cache": True}]}


def _with_blocks(d: dict, **axes: object) -> dict:
    d["models"].append({"name": "fd-tiny", "arch": "fast_dllm_v2", "source": {"synthetic": "tiny"}})
    d["grid"]["block_diffusion"] = {**AXES, **axes}
    return d


def test_the_axes_plan_one_run_each_with_k_as_steps() -> None:
    spec = spec_from(mutated(lambda d: _with_blocks(d)))
    runs = [r.config for r in plan_runs(spec) if r.config.model.arch == "fast_dllm_v2"]
    points = len(spec.grid.batch_sizes) * len(spec.grid.length_pairs())
    assert len(runs) == points * 2 * 2 * 2  # thresholds x sub-blocks x variants
    for run in runs:
        setting = run.block_diffusion
        assert run.steps == schedule(run.prompt_length, run.generation_length, 8, setting.sub_block_length).max_forwards
        assert run.block_length == 8 and run.timed_steps is None
        assert run.commit_rule == f"threshold@{setting.threshold:g}/sub{setting.sub_block_length}"
    assert {r.impl_name for r in runs} == {"vanilla", "subcache"}
    assert not any(r.block_diffusion.commit_mask_predictions or r.block_diffusion.prefill_one_block_prompt for r in runs)
    # The other models' runs keep the ids they had before the family existed.
    before = {r.run_id for r in plan_runs(spec_from(mutated(lambda d: None)))}
    assert before <= {r.run_id for r in plan_runs(spec)}


CASES = [
    ("axes on a llada model", lambda d: d["models"][1].update(block_diffusion=AXES),
     "models.1.block_diffusion: block_diffusion sampler axes given for a llada model"),
    ("axes without the family", lambda d: d["grid"].update(block_diffusion=AXES),
     "grid.block_diffusion: given but no model generates with the block_diffusion sampler"),
    ("the family without axes", lambda d: _with_blocks(d)["grid"].pop("block_diffusion"),
     "grid.block_diffusion: model 'fd-tiny' generates with the block_diffusion sampler but neither"),
    ("a sub-block that does not divide", lambda d: _with_blocks(d, sub_block_lengths=[3]),
     "grid.block_diffusion.sub_block_lengths: [3] do not divide block length 8"),
    ("a threshold above 1", lambda d: _with_blocks(d, thresholds=[1.5]),
     "grid.block_diffusion.thresholds.0: Input should be less than or equal to 1"),
    ("no threshold", lambda d: _with_blocks(d, thresholds=[]), "grid.block_diffusion.thresholds"),
    ("a vanilla that is not", lambda d: _with_blocks(d, impl=[{"name": "vanilla", "graph": True}]),
     "grid.block_diffusion.impl.0.name: 'vanilla' names the plain sampler"),
    ("sampling more than one row", lambda d: (_with_blocks(d), d["controls"].update(temperature=0.7)),
     "controls.temperature: 0.7 samples, and block diffusion (models.2) samples one row only"),
    ("dream axes on it", lambda d: _with_blocks(d)["models"][2].update(dream={"steps": [8]}),
     "models.2.dream: dream sampler axes given for a fast_dllm_v2 model"),
    ("the 8b preset", lambda d: _with_blocks(d)["models"][2]["source"].update(synthetic="8b"),
     "models.2.source.synthetic: '8b' is not a preset of fast_dllm_v2; allowed: tiny, small, 7b"),
]


@pytest.mark.parametrize("mutate, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_it_cannot_run_is_refused_naming_the_field(mutate, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from(mutated(mutate))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_run_config_holds_its_schedule() -> None:
    common = {"model": ModelSpec(name="fd", arch="fast_dllm_v2", source={"synthetic": "tiny"}), "batch_size": 1,
              "prompt_length": 20, "generation_length": 24, "block_length": 8, "controls": Controls(),
              "prompts": Prompts(), "prompt_ids": [0], "quality": QualitySpec(),
              "block_diffusion": BlockDiffusionSampling(sub_block_length=4, threshold=0.9)}  # fmt: skip
    assert RunConfig(**common, steps=25).steps == schedule(20, 24, 8, 4).max_forwards == 25
    with pytest.raises(ValueError, match="schedule's forwards at threshold 1, 25, not 24"):
        RunConfig(**common, steps=24)
    with pytest.raises(ValueError, match="does not divide block_length 8"):
        RunConfig(**common | {"block_diffusion": BlockDiffusionSampling(sub_block_length=3, threshold=1)}, steps=25)


# ---------------------------------------------------------------- the checkpoint format


CPU = torch.device("cpu")
FLOAT32 = Controls(dtype="float32", attention="sdpa", device="cpu")


def test_the_official_format_loads_without_remote_code(tmp_path: Path) -> None:
    directory = write_tiny_fast_dllm_checkpoint(tmp_path / "fd", seed=golden()["checkpoint"]["seed"])
    loaded = load_model(ModelSpec(name="fd", arch="fast_dllm_v2", source={"checkpoint": str(directory)}), FLOAT32, CPU)
    assert type(loaded.model).__name__ == "Qwen2ForCausalLM" and is_dream_bidirectional(loaded.model)
    assert loaded.mask_token_id == MASK_ID  # the tokenizer's <|mdm_mask|>: config.json names none
    assert STOP_ID in loaded.eos_token_ids and MASK_ID not in loaded.eos_token_ids
    case = next(c for c in golden()["generation_cases"] if c["name"] == "b8s4-p11-t0.7-cache")
    assert run_golden_case(loaded.model, case).sequences.tolist() == case["sequences"]
    with pytest.raises(CheckpointFormatError, match="give it arch: fast_dllm_v2"):
        load_model(ModelSpec(name="d", arch="dream", source={"checkpoint": str(directory)}), FLOAT32, CPU)


class _Vocab:
    mask_token_id = None

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab

    def get_vocab(self) -> dict[str, int]:
        return self.vocab


def test_the_mask_is_read_where_each_checkpoint_keeps_it() -> None:
    assert fast_dllm_mask_token_id({}, _Vocab({"|<MASK>|": 151665}), None) == 151665  # the 7B's tokenizer
    assert fast_dllm_mask_token_id({}, _Vocab({"<|mdm_mask|>": 7}), None) == 7  # a miniature's
    assert fast_dllm_mask_token_id({"mask_token_id": 9}, _Vocab({"<|mdm_mask|>": 7}), None) == 9
    assert fast_dllm_mask_token_id({}, _Vocab({}), 11) == 11
    with pytest.raises(CheckpointFormatError, match="mask token unknown"):
        fast_dllm_mask_token_id({}, _Vocab({}), None)


def test_configs_it_cannot_load_are_refused(tmp_path: Path) -> None:
    raw = json.loads((write_tiny_fast_dllm_checkpoint(tmp_path, tokenizer=False) / "config.json").read_text())
    config = qwen2_config_from_fast_dllm(raw)
    assert (config.num_hidden_layers, config.num_key_value_heads, config.vocab_size) == (2, 2, 256)
    with pytest.raises(CheckpointFormatError, match="sliding-window"):
        qwen2_config_from_fast_dllm(raw | {"layer_types": ["full_attention", "sliding_attention"]})
    with pytest.raises(CheckpointFormatError, match="bd_size"):
        qwen2_config_from_fast_dllm(raw | {"bd_size": 0})
    with pytest.raises(CheckpointFormatError, match="Fast-dLLM v2 config.json lacks hidden_size"):
        qwen2_config_from_fast_dllm({k: v for k, v in raw.items() if k != "hidden_size"})


def test_the_7b_three_way_spec_is_predicted_on_h100_and_h200(capsys: pytest.CaptureFixture[str]) -> None:
    """The same base model in three paradigms at one shape; `plan --profile` predicts its time on either GPU, within
    one short lease."""
    from orchestrator.cli import main
    from specs.loader import load_spec
    from specs.registry import full_shape

    spec = load_spec("specs/campaign-three-way-7b.yaml")
    assert {m.arch for m in spec.models} == {"qwen2", "fast_dllm_v2", "dream"}
    assert len({full_shape(m.arch) for m in spec.models}) == 1 and all(m.shape() == full_shape("qwen2") for m in spec.models)
    for profile in ("h100-sxm", "h200"):
        assert main(["plan", "specs/campaign-three-way-7b.yaml", "--profile", profile]) == 0
        last = capsys.readouterr().out.splitlines()[-1]
        assert last.startswith(f"predicted wall time on {profile}: ") and " min (" in last
        assert 10 < float(last.split(": ")[1].split(" min")[0]) < 30


def test_extrapolation_with_fast_dllm_and_no_step_sampler_names_the_model_and_why() -> None:
    def only_blocks(d: dict) -> None:
        _with_blocks(d)
        d["models"] = [m for m in d["models"] if m["arch"] != "llada"]
        d["grid"].pop("llada", None)
        d.pop("quality", None)
        d["controls"]["extrapolation"] = {"timed_steps": 2}

    with pytest.raises(SpecError, match=r"controls.extrapolation: times the first steps of LLaDA's or Dream's "
                       r"sampler .* this spec has neither: fd-tiny \(Fast-dLLM v2\) decodes block by block"):
        spec_from(mutated(only_blocks))
