"""Dream's checkpoint loads without remote code as a bidirectional Qwen2ForCausalLM whose logits are the
official DreamModel's (golden data recorded from Dream's own modeling code: tests/data/dream_golden)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import Qwen2ForCausalLM
from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention

from specs.shapes import ModelShape
from tests.dream_golden.tiny_checkpoint import MASK_ID, dream_config
from tests.dream_models import GOLDEN_DIR, golden, golden_checkpoint, load_dream
from workers.errors import CheckpointFormatError
from workers.models.dream_checkpoint import (
    dream_mask_token_id,
    dream_to_qwen2_name,
    is_dream_config,
    qwen2_config_from_dream,
)
from workers.models.dream_model import (
    is_dream_bidirectional,
    make_dream_bidirectional,
    padding_inputs,
    predicting_positions,
)
from workers.models.layouts import qwen2_config_for_shape

# Float32 on the CPU with the official kernel (SDPA): the logits come out bit-identical here. The tolerance
# only allows a BLAS that splits a reduction differently with another thread count (the recording used one);
# the golden cases survive logit noise of 1e-4 unchanged (golden.json "robustness").
LOGITS_ATOL = 1e-5


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return golden_checkpoint(tmp_path_factory.mktemp("dream"))


@pytest.fixture(scope="module")
def model(checkpoint: Path) -> Qwen2ForCausalLM:
    return load_dream(checkpoint)


def _logits_case(name: str) -> dict[str, torch.Tensor]:
    tensors = load_file(str(GOLDEN_DIR / "logits.safetensors"))
    return {key.split(".", 1)[1]: value for key, value in tensors.items() if key.startswith(name + ".")}


# ---------------------------------------------------------------- config and names


def test_dream_config_maps_every_shape_number() -> None:
    raw = {**dream_config(), "rope_theta": 1234.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096}
    assert is_dream_config(raw) and not is_dream_config({"model_type": "qwen2"})
    config = qwen2_config_from_dream(raw)
    assert (config.vocab_size, config.hidden_size, config.intermediate_size) == (256, 64, 128)
    assert (config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads) == (2, 4, 2)
    assert config.rope_parameters == {"rope_type": "default", "rope_theta": 1234.0}
    assert (config.rms_norm_eps, config.max_position_embeddings) == (1e-5, 4096)
    assert config.tie_word_embeddings is False and config.sliding_window is None
    assert set(config.layer_types) == {"full_attention"}
    # Keys config.json may omit take DreamConfig's defaults, not Qwen2Config's.
    sparse = {
        key: raw[key]
        for key in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
        )
    }
    defaults = qwen2_config_from_dream(sparse)
    assert defaults.rope_parameters["rope_theta"] == 10000.0 and defaults.num_key_value_heads == 4


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
        ({"hidden_size": None}, "hidden_size"),
        ({"head_dim": 32}, "head_dim"),
    ],
)
def test_a_config_that_would_not_map_exactly_is_refused(change: dict, field: str) -> None:
    with pytest.raises(CheckpointFormatError, match=field):
        qwen2_config_from_dream({**dream_config(), **change})


def test_checkpoint_keys_are_qwen2_names() -> None:
    assert (
        dream_to_qwen2_name("model.layers.3.self_attn.q_proj.bias") == "model.layers.3.self_attn.q_proj.bias"
    )
    assert dream_to_qwen2_name("lm_head.weight") == "lm_head.weight"
    assert dream_to_qwen2_name("model.layers.0.self_attn.rotary_emb.inv_freq") is None


def test_mask_token_comes_from_override_then_config_then_tokenizer() -> None:
    raw = dream_config()
    assert dream_mask_token_id(raw, None, override=7) == 7
    assert dream_mask_token_id(raw, None, override=None) == MASK_ID

    class Stub:  # Dream's tokenizer as far as the lookup reads it (no hub access in tests)
        mask_token_id = None

        @staticmethod
        def get_vocab() -> dict[str, int]:
            return {"<|mask|>": 151666, "a": 5}

    no_field = {key: value for key, value in raw.items() if key != "mask_token_id"}
    assert dream_mask_token_id(no_field, Stub(), override=None) == 151666  # type: ignore[arg-type]
    with pytest.raises(CheckpointFormatError, match="mask_token_id"):
        dream_mask_token_id(no_field, None, override=None)


def test_shape_config_is_qwen2_with_qkv_bias_only() -> None:
    shape = ModelShape(
        hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128, vocab_size=256,
        rope_theta=1e6, rms_norm_eps=1e-6, attention_bias=True,
    )  # fmt: skip
    config = qwen2_config_for_shape(shape)
    with torch.device("meta"):
        built = Qwen2ForCausalLM(config)
    attention = built.model.layers[0].self_attn
    assert (
        attention.q_proj.bias is not None
        and attention.k_proj.bias is not None
        and attention.v_proj.bias is not None
    )
    assert attention.o_proj.bias is None and built.model.layers[0].mlp.gate_proj.bias is None
    assert config.rope_parameters["rope_theta"] == 1e6 and set(config.layer_types) == {"full_attention"}
    with pytest.raises(ValueError, match="attention_bias"):
        qwen2_config_for_shape(shape.model_copy(update={"attention_bias": False}))


# ---------------------------------------------------------------- the model


def test_conversion_works_on_the_meta_device_without_storage() -> None:
    config = qwen2_config_from_dream(dream_config())
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    names = [name for name, _ in model.named_parameters()]
    make_dream_bidirectional(model)
    assert is_dream_bidirectional(model) and model.config.is_causal is False
    assert all(not layer.self_attn.is_causal for layer in model.model.layers)
    assert [name for name, _ in model.named_parameters()] == names  # classes swapped, nothing added
    assert all(p.is_meta for p in model.parameters())


def test_checkpoint_loads_without_remote_code(checkpoint: Path, model: Qwen2ForCausalLM) -> None:
    assert not list(checkpoint.glob("*.py"))
    on_disk = load_file(str(checkpoint / "model.safetensors"))
    state = model.state_dict()
    assert on_disk.keys() == state.keys()
    assert all(torch.equal(on_disk[key], state[key]) for key in on_disk)


@pytest.mark.parametrize("name", [case["name"] for case in golden()["logits_cases"]])
def test_logits_equal_the_official_models(model: Qwen2ForCausalLM, name: str) -> None:
    case = _logits_case(name)
    attention, positions = padding_inputs(model, case.get("attention_mask"))
    if "position_ids" in case:
        assert torch.equal(positions, case["position_ids"])  # the official tok_idx
    with torch.no_grad():
        logits = model(case["input_ids"], attention_mask=attention, position_ids=positions).logits
    real = (
        case["attention_mask"].bool()
        if "attention_mask" in case
        else torch.ones(logits.shape[:2], dtype=torch.bool)
    )
    torch.testing.assert_close(logits[real], case["logits"][real], atol=LOGITS_ATOL, rtol=0)


def test_shifted_rows_are_the_official_shift(model: Qwen2ForCausalLM) -> None:
    """Projecting only the rows `predicting_positions` names gives the official shift,
    `cat([l[:, :1], l[:, :-1]])`."""
    case = _logits_case("nopad_last")
    official = case["logits"]
    shifted = torch.cat([official[:, :1], official[:, :-1]], dim=1)  # [B, L, V]
    length = official.shape[1]
    assert predicting_positions(0, 5, "cpu").tolist() == [0, 0, 1, 2, 3]
    assert predicting_positions(3, 6, "cpu").tolist() == [2, 3, 4]
    for start in (0, 5):
        with torch.no_grad():
            rows = model(case["input_ids"], logits_to_keep=predicting_positions(start, length, "cpu")).logits
        torch.testing.assert_close(rows, shifted[:, start:], atol=LOGITS_ATOL, rtol=0)


def test_a_causal_or_unmasked_model_is_caught(checkpoint: Path, model: Qwen2ForCausalLM) -> None:
    """The comparison can fail: Qwen2's causal attention, or padding ignored, moves the logits by O(1)."""
    nopad = _logits_case("nopad_first")
    with torch.no_grad():
        causal = load_dream(checkpoint, bidirectional=False)(nopad["input_ids"]).logits
    assert (causal - nopad["logits"]).abs().max() > 0.1
    leftpad = _logits_case("leftpad_first")
    real = leftpad["attention_mask"].bool()
    with torch.no_grad():
        unmasked = model(leftpad["input_ids"]).logits
    assert (unmasked[real] - leftpad["logits"][real]).abs().max() > 0.1


def test_pad_queries_attend_to_nothing(model: Qwen2ForCausalLM) -> None:
    """The official 4-D mask hides a pad as a query too: its attention output is zero, so its logits are those
    of its embedding passed through the MLPs alone, and changing real tokens cannot move them."""
    case = _logits_case("leftpad_first")
    attention, positions = padding_inputs(model, case["attention_mask"])
    other = case["input_ids"].clone()
    real = case["attention_mask"].bool()
    other[real] = (other[real] + 1) % 255
    with torch.no_grad():
        first = model(case["input_ids"], attention_mask=attention, position_ids=positions).logits
        second = model(other, attention_mask=attention, position_ids=positions).logits
    assert torch.equal(first[~real], second[~real])
    assert padding_inputs(model, torch.ones(2, 4, dtype=torch.long)) == (None, None)


def test_flash_layout_gets_a_two_dimensional_mask(checkpoint: Path) -> None:
    """flash-attn drops pad queries itself from a 2-D mask; sdpa gets the boolean 4-D outer-and mask."""
    model = load_dream(checkpoint)
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    attention, _ = padding_inputs(model, mask)
    expected = mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :]
    assert attention.dtype == torch.bool and torch.equal(attention, expected)
    model.config._attn_implementation = "flash_attention_2"
    attention, _ = padding_inputs(model, mask)
    assert attention.ndim == 2 and torch.equal(attention.bool(), mask.bool())


def test_attention_kernel_never_receives_position_ids(
    model: Qwen2ForCausalLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flash-attn reads position ids on the host (a sync per layer): the Dream attention drops them."""
    seen: list[set[str]] = []
    original = Qwen2Attention.forward

    def spy(self, hidden, rotary, mask, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(set(kwargs))
        return original(self, hidden, rotary, mask, **kwargs)

    monkeypatch.setattr(Qwen2Attention, "forward", spy)
    with torch.no_grad():
        model(torch.tensor([[3, 4, 5]]), position_ids=torch.tensor([[0, 1, 2]]))
    assert len(seen) == model.config.num_hidden_layers
    assert all("position_ids" not in kwargs for kwargs in seen)
