"""The workload every estimate takes: what counts as set, what a run config gives, what predict refuses."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from types import SimpleNamespace

import pytest

from roofline.errors import RooflineInputError
from roofline.hardware import get_hardware
from roofline.predict import predict
from roofline.workload import Workload, run_workload

H200 = get_hardware("h200")


def test_set_fields_are_the_ones_off_their_defaults() -> None:
    base = Workload(prompt_len=8, gen_len=8)
    assert base.set_fields() == {"prompt_len", "gen_len"}
    # Zero guidance and a vanilla cache are the defaults: not set. Dream's default alg is unset, not "entropy".
    assert replace(base, cfg_scale=0, cache="none").set_fields() == {"prompt_len", "gen_len"}
    assert replace(base, alg="entropy", steps=4).set_fields() == {"prompt_len", "gen_len", "alg", "steps"}
    assert (base.dream_alg, replace(base, alg="origin").dream_alg) == ("entropy", "origin")
    assert base.seq_len == 16
    with pytest.raises(FrozenInstanceError):
        base.batch = 2  # type: ignore[misc]


def test_a_run_config_gives_its_lengths_batch_and_dtype() -> None:
    config = SimpleNamespace(prompt_length=64, generation_length=32, batch_size=4,
                             controls=SimpleNamespace(dtype="float32"))
    assert run_workload(config, steps=8) == Workload(prompt_len=64, gen_len=32, batch=4, element_bytes=4, steps=8)
    # No controls (a stand-in): the study's BF16.
    assert run_workload(SimpleNamespace(prompt_length=1, generation_length=1, batch_size=1)).element_bytes == 2


def test_predict_names_another_familys_setting() -> None:
    with pytest.raises(RooflineInputError, match=r"cache, cfg_scale: not a setting of arch 'dream'"):
        predict("dream", None, Workload(prompt_len=8, gen_len=8, steps=8, cache="dual", cfg_scale=1.0), hardware=H200)
    with pytest.raises(RooflineInputError, match="compiled_decode"):
        predict("llada", None, Workload(prompt_len=8, gen_len=8, steps=8, block_length=8, compiled_decode=True),
                hardware=H200)
    # Settings that cost a family nothing pass whatever is set: a run records them whatever its family.
    costless = Workload(prompt_len=8, gen_len=8, temperature=0.7, remasking="random", truncate_blocks=True)
    assert predict("llama", None, costless, hardware=H200).latency_s == predict(
        "llama", None, Workload(prompt_len=8, gen_len=8), hardware=H200
    ).latency_s

