"""The golden data of Dream's official code is whole and still describes the checkpoint the tests build.

The comparison of the project's loader and sampler against this data lives with them; this checks the data
itself, so that a failure there is never the data's (a changed random stream, a truncated file).
"""

from __future__ import annotations

import json
import tempfile
from itertools import product
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.dream_golden.tiny_checkpoint import (
    MASK_ID,
    WEIGHTS_NAME,
    dream_config,
    dream_state_dict,
    state_dict_sha256,
    write_tiny_dream_checkpoint,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "dream_golden"
ALGS = {"origin", "maskgit_plus", "topk_margin", "entropy"}


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads((DATA / "golden.json").read_text())


def test_builder_reproduces_the_recorded_weights(golden: dict) -> None:
    recorded = golden["checkpoint"]
    assert state_dict_sha256(dream_state_dict(recorded["seed"])) == recorded["state_dict_sha256"]
    assert dream_config() == recorded["config"]
    # A different seed is a different model: the digest pins the weights, not just their names and shapes.
    assert state_dict_sha256(dream_state_dict(recorded["seed"] + 1)) != recorded["state_dict_sha256"]


def test_written_checkpoint_is_deterministic_and_holds_the_state_dict() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first = write_tiny_dream_checkpoint(Path(tmp) / "a")
        second = write_tiny_dream_checkpoint(Path(tmp) / "b")
        for name in ("config.json", "generation_config.json", WEIGHTS_NAME):
            assert (first / name).read_bytes() == (second / name).read_bytes()
        on_disk = load_file(str(first / WEIGHTS_NAME))
    expected = dream_state_dict(0)
    assert on_disk.keys() == expected.keys()
    assert all(torch.equal(on_disk[k], expected[k]) for k in expected)
    # Norms and biases are not the trivial 1 and 0, so a loader that drops them is caught.
    assert not torch.allclose(on_disk["model.norm.weight"], torch.ones(64))
    assert on_disk["model.layers.0.self_attn.k_proj.bias"].abs().min() > 0


def test_every_algorithm_setting_step_count_and_prompt_is_recorded(golden: dict) -> None:
    cases = golden["generation_cases"]
    combos = {(c["alg"], c["setting"], c["kwargs"]["steps"], c["prompt"]) for c in cases}
    assert combos == set(product(ALGS, {"greedy", "topp", "topk"}, {8, 3}, {"nopad", "leftpad"}))
    assert len({c["seed"] for c in cases}) == len(cases)
    assert golden["robustness"]["changed_cases"] == []


def test_each_case_history_ends_in_its_sequences_and_keeps_the_prompt(golden: dict) -> None:
    for case in golden["generation_cases"]:
        kwargs, prompt = case["kwargs"], case["input_ids"]
        assert len(case["history"]) == case["forwards"] == kwargs["steps"], case["name"]
        assert case["history"][-1] == case["sequences"], case["name"]
        for row, ids in zip(case["sequences"], prompt):
            assert row[: len(ids)] == ids, case["name"]
            assert len(row) == len(ids) + kwargs["max_new_tokens"], case["name"]
            assert MASK_ID not in row[len(ids) :], case["name"]


def test_logits_file_holds_every_recorded_case(golden: dict) -> None:
    tensors = load_file(str(DATA / "logits.safetensors"))
    for case in golden["logits_cases"]:
        logits = tensors[f"{case['name']}.logits"]
        assert list(logits.shape) == case["shape"] and torch.isfinite(logits).all()
        assert tensors[f"{case['name']}.input_ids"].shape == logits.shape[:2]
        padded = case["forward_attention_mask"] == "4d_bool_outer_and"
        assert (f"{case['name']}.attention_mask" in tensors) == padded
        assert (f"{case['name']}.position_ids" in tensors) == padded
