"""The shipped miniature pair: intact, small, in the formats the loaders read, and trained beyond unigram."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from miniature.export import verify_checksums
from specs.loader import load_spec
from specs.schema import CheckpointSource, Controls
from workers.models.loading import load_model, read_provenance

PAIR = Path(__file__).resolve().parents[1] / "models" / "miniature"
MAX_BYTES = 20 * 2**20


def test_every_shipped_file_matches_its_checksum() -> None:
    assert verify_checksums(PAIR) == []


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_each_model_is_bf16_safetensors_under_20_mb(arch: str) -> None:
    weights = PAIR / arch / "model.safetensors"
    assert weights.stat().st_size < MAX_BYTES
    header_len = int.from_bytes(weights.read_bytes()[:8], "little")
    header = json.loads(weights.read_bytes()[8 : 8 + header_len])
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"BF16"}


def test_llada_is_stored_in_the_official_format_and_llama_in_transformers_format() -> None:
    llada = json.loads((PAIR / "llada" / "config.json").read_text())
    llama = json.loads((PAIR / "llama" / "config.json").read_text())
    assert llada["model_type"] == "llada" and llada["n_kv_heads"] == llada["n_heads"]
    assert llama["model_type"] == "llama" and llama["num_key_value_heads"] < llama["num_attention_heads"]


def test_the_models_learned_beyond_token_frequencies() -> None:
    for arch in ("llama", "llada"):
        provenance = read_provenance(PAIR / arch)
        assert provenance is not None and provenance.arch == arch
        assert provenance.learned_beyond_unigram, provenance
    provenance = json.loads((PAIR / "provenance.json").read_text())
    assert provenance["models"]["llama"]["parameters"] == provenance["models"]["llada"]["parameters"]


def test_the_default_spec_loads_both_through_the_checkpoint_loader() -> None:
    spec = load_spec("specs/smoke.yaml")
    sources = [m.source for m in spec.models]
    assert all(isinstance(s, CheckpointSource) for s in sources)
    ids = torch.tensor([[5, 9, 200, 31]])
    for model in spec.models:
        loaded = load_model(model, Controls(dtype="float32", device="cpu"), torch.device("cpu"))
        assert loaded.weights == "real" and loaded.provenance is not None
        with torch.no_grad():
            logits = loaded.model(input_ids=ids).logits
        assert torch.isfinite(logits).all() and logits.shape[-1] == len(loaded.tokenizer)
        if model.arch == "llada":
            assert loaded.mask_token_id == loaded.tokenizer.convert_tokens_to_ids("<|mdm_mask|>")
