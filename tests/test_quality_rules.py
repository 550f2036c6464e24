"""Refused when the spec is loaded, each in one line naming the field: a model named as a packaged evaluator, one
judge named twice, the perplexity judge as BERTScore's model, quality settings nothing reads, and a block length a
block-diffusion checkpoint was not trained with."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from specs.loader import PACKAGE_ROOT, SpecError, load_spec
from tests.spec_fixtures import mutated, spec_from


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        spec_from(data)
    message = str(caught.value).removeprefix("test.yaml: ")
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["packaged-smollm2", "packaged-minilm"])
def test_a_model_cannot_take_a_packaged_evaluators_name(name: str) -> None:
    def rename(d: dict[str, Any]) -> None:
        d["models"][0]["name"] = name
        d["quality"]["perplexity"]["evaluator"] = name  # as the packaged judge would be named: taken for it

    assert refusal(mutated(rename)).startswith(f"models.0.name: '{name}' is reserved for the packaged ")


def test_the_same_judge_twice_is_refused_by_name_and_by_model() -> None:
    def twice(d: dict[str, Any]) -> None:
        d["quality"]["perplexity"]["second_evaluator"] = "llama-tiny"

    assert refusal(mutated(twice)).startswith(
        "quality.perplexity.second_evaluator: 'llama-tiny' is the evaluator already, so its rows would repeat")

    def same_weights(d: dict[str, Any]) -> None:  # another name for the same checkpoint
        d["models"].append({"name": "llama-again", "arch": "llama", "source": {"checkpoint": "models/miniature/llama"}})
        d["quality"]["perplexity"] = {"evaluator": "llama-again", "second_evaluator": "models/miniature/llama"}

    assert refusal(mutated(same_weights)).startswith("quality.perplexity.second_evaluator: 'models/miniature/llama' is "
                                                     "the evaluator already (the same model as 'llama-again')")
    spec_from(mutated(lambda d: d["quality"]["perplexity"].update(second_evaluator="packaged-smollm2")))  # another


def test_the_perplexity_judge_is_no_bertscore_model() -> None:
    data = mutated(lambda d: d["quality"]["bertscore"].update(model="packaged-smollm2"))
    assert refusal(data).startswith("quality.bertscore.model: 'packaged-smollm2' is the packaged perplexity judge")


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda q: (q.pop("bertscore"), q.pop("perplexity"), q.pop("llama_sampled_temperature"),
                q.update(parity={"alpha": 0.1})),
     "quality.parity.alpha: 0.1 is given, but neither perplexity nor bertscore is enabled"),
    (lambda q: (q.pop("bertscore"), q.update(parity={"bertscore_f1": 0.05})),
     "quality.parity.bertscore_f1: 0.05 is given, but quality.bertscore is off, so nothing reads it"),
    (lambda q: (q.pop("perplexity"), q.update(parity={"perplexity_ratio": 1.5})),
     "quality.parity.perplexity_ratio: 1.5 is given, but quality.perplexity is off, so nothing reads it"),
    (lambda q: (q.pop("llama_sampled_temperature"), q.update(llama_sampled_samples=5)),
     "quality.llama_sampled_samples: 5 is given, but quality.llama_sampled_temperature is not"),
])
def test_quality_settings_nothing_reads_are_refused(mutate, expected: str) -> None:
    data = mutated(lambda d: mutate(d["quality"]))
    assert refusal(data).startswith(expected)
    quality = copy.deepcopy(data["quality"])
    quality.pop("parity", None)
    quality.pop("llama_sampled_samples", None)
    spec_from({**data, "quality": quality})  # the same spec without the unread setting is taken


def test_a_spec_read_back_from_its_own_dump_keeps_its_defaults() -> None:
    spec = load_spec("specs/synthetic-8b.yaml")  # quality off: parity and the samples stay at their defaults
    assert spec_from(spec.model_dump(mode="json")) == spec


def three_way(block_lengths: list[int], checkpoint: str = "models/miniature/fast_dllm_v2") -> dict[str, Any]:
    data = yaml.safe_load((PACKAGE_ROOT / "specs" / "three-way.yaml").read_text(encoding="utf-8"))
    data["grid"]["block_diffusion"]["block_lengths"] = block_lengths
    data["models"][2]["source"]["checkpoint"] = checkpoint
    return data


def test_a_block_length_the_checkpoint_was_not_trained_with_is_refused(tmp_path: Path) -> None:
    config = PACKAGE_ROOT / "models" / "miniature" / "fast_dllm_v2" / "config.json"
    assert json.loads(config.read_text())["bd_size"] == 32
    assert refusal(three_way([16])) == ("grid.block_diffusion.block_lengths: 16 is not the block 'fast-dllm-v2-mini' "
                                        "was trained with (bd_size 32 in models/miniature/fast_dllm_v2/config.json); allowed: 32")
    spec_from(three_way([32]))
    trained_16 = tmp_path / "fast_dllm_v2"
    shutil.copytree(config.parent, trained_16)
    (trained_16 / "config.json").write_text(json.dumps({**json.loads(config.read_text()), "bd_size": 16}))
    spec_from(three_way([16], str(trained_16)))  # the block it was trained with
