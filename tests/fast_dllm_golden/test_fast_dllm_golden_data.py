"""The golden data of Fast-dLLM v2's official `generate` is whole and still describes the checkpoint and the cases
the tests build.

The comparison of the project's loader and sampler against this data lives with them
(tests/test_block_diffusion_sampler.py); this checks the data itself, so that a failure there is never the data's
(a changed random stream, a case edited on one side only).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.fast_dllm_golden.cases import NO_STOP, generation_cases
from tests.fast_dllm_golden.tiny_checkpoint import (
    MASK_ID,
    WEIGHTS_NAME,
    fast_dllm_config,
    fast_dllm_state_dict,
    state_dict_sha256,
    write_tiny_fast_dllm_checkpoint,
)
from tests.fast_dllm_models import golden

KINDS = ("block", "sub", "cache")  # what the cases must cover besides their lengths


def test_builder_reproduces_the_recorded_weights_and_config() -> None:
    recorded = golden()["checkpoint"]
    assert state_dict_sha256(fast_dllm_state_dict(recorded["seed"])) == recorded["state_dict_sha256"]
    assert state_dict_sha256(fast_dllm_state_dict(recorded["seed"] + 1)) != recorded["state_dict_sha256"]
    assert fast_dllm_config() == recorded["config"]
    with tempfile.TemporaryDirectory() as tmp:
        written = write_tiny_fast_dllm_checkpoint(Path(tmp), seed=recorded["seed"])
        on_disk = load_file(str(written / WEIGHTS_NAME))
    expected = fast_dllm_state_dict(recorded["seed"])
    assert on_disk.keys() == expected.keys() and all(torch.equal(on_disk[k], expected[k]) for k in expected)


def test_the_recorded_cases_are_the_cases_module() -> None:
    """Same names, prompts, seeds and kwargs (an EOS case's stop token was chosen when recording)."""
    recorded = golden()["generation_cases"]
    defined = generation_cases()
    assert [c["name"] for c in recorded] == [c["name"] for c in defined]
    for got, want in zip(recorded, defined):
        stop = got["kwargs"]["stop_token"]
        assert {**got["kwargs"], "stop_token": want["kwargs"]["stop_token"]} == want["kwargs"], got["name"]
        assert (got["input_ids"], got["seed"]) == (want["input_ids"], want["seed"]), got["name"]
        assert (stop != NO_STOP) == ("stop_at" in want), got["name"]
    assert golden()["robustness"]["changed_cases"] == []


def test_cases_cover_the_edge_cases() -> None:
    """Every prompt length against the block, thresholds of one and several tokens per forward, the sub-block cache
    (its sub-block forwards ran), batches of one to three rows, sampling, short generations, and stop tokens that cut
    the sequences."""
    cases = golden()["generation_cases"]
    block_of = {c["name"]: c["kwargs"]["block_size"] for c in cases}
    lengths = {(len(c["input_ids"][0]) > block_of[c["name"]], len(c["input_ids"][0]) % block_of[c["name"]] == 0)
               for c in cases}  # fmt: skip
    assert lengths == {(False, False), (True, False), (True, True), (False, True)}  # shorter, longer, multiple, one
    assert {c["kwargs"]["threshold"] for c in cases} >= {1.0, 0.7, 0.3}
    assert {len(c["input_ids"]) for c in cases} == {1, 2, 3}
    assert any(c["kwargs"]["temperature"] > 0 for c in cases)
    assert any(call[2] is not None for c in cases for call in c["forward_log"])  # a sub-block fed alone
    assert any(len(c["sequences"][0]) == len(c["input_ids"][0]) for c in cases)  # no block at all
    stopped = [c for c in cases if c["kwargs"]["stop_token"] != NO_STOP]
    assert stopped and all(any(c["kwargs"]["stop_token"] in row for row in c["sequences"]) for c in stopped)
    assert any(MASK_ID in row for c in stopped for row in c["sequences"])  # a row cut while still masked


def test_each_case_keeps_its_prompt_and_counts_its_forwards() -> None:
    for case in golden()["generation_cases"]:
        assert len(case["forward_log"]) == case["forwards"], case["name"]
        for row, ids in zip(case["sequences"], case["input_ids"]):
            assert row[: len(ids)] == ids, case["name"]
