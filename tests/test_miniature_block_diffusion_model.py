"""The block-diffusion member on tiny random models: the adapted network starts as the AR one, the training
forward is what inference computes with the clean blocks cached, the export is Fast-dLLM v2's format and
reads back as transformers' Qwen2, and the stage resumes to the same bytes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from miniature.architecture import miniature_shape
from miniature.block_diffusion import block_forward_mask
from miniature.block_diffusion_export import load_as_qwen2, save_block_diffusion
from miniature.block_diffusion_model import adapt, noisy_logits, qwen2_model, read_base
from miniature.block_diffusion_stage import BlockDiffusionStage, run_block_diffusion_stage
from miniature.block_diffusion_train import ARCH, BEST_WEIGHTS_FILE
from miniature.export import save_llama, write_training_log
from miniature.tokenizer import special_ids, train_tokenizer
from miniature.trainer import CHECKPOINT_FILE, TrainConfig, build_model
from workers.models.loading import read_provenance

BLOCK = 8
TEXT = ["The parser reads the file before it exits.", "A module returns every record in order."] * 20
# The keys of Efficient-Large-Model/Fast_dLLM_v2_7B's config.json, but its `auto_map` (no modeling code ships).
OFFICIAL_KEYS = {
    "architectures", "attention_dropout", "bd_size", "bos_token_id", "conplemenrary_mask", "eos_token_id",
    "hidden_act", "hidden_size", "initializer_range", "intermediate_size", "layer_types", "max_position_embeddings",
    "max_window_layers", "model_type", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
    "pad_token_id", "rms_norm_eps", "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings",
    "torch_dtype", "transformers_version", "use_cache", "use_sliding_window", "vocab_size",
}  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXT, vocab_size=300)


def _shape(vocab: int):
    return dataclasses.replace(miniature_shape("llama", vocab, hidden_size=64, num_layers=2), context=32)


def _jitter(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights (and biases) away from their initial values, so a dropped or swapped tensor would show."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    return model.eval()


def _ids(rows: int, length: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randint(3, vocab, (rows, length), generator=torch.Generator().manual_seed(seed))


def test_the_adapted_network_computes_what_the_ar_member_computes(tokenizer) -> None:
    shape, special = _shape(len(tokenizer)), special_ids(tokenizer)
    llama = _jitter(build_model(shape, special, seed=0), seed=1)
    adapted = adapt(qwen2_model(shape, special, BLOCK), llama.state_dict()).eval()
    biases = [p for name, p in adapted.named_parameters() if name.endswith("proj.bias")]
    assert len(biases) == 3 * shape.num_layers and all(float(b.abs().max()) == 0 for b in biases)
    ids = _ids(2, 20, len(tokenizer), seed=2)
    with torch.no_grad():
        assert torch.allclose(adapted(input_ids=ids).logits, llama(input_ids=ids).logits, atol=1e-5)
    with pytest.raises(ValueError, match="not the AR member's shape"):
        adapt(qwen2_model(shape, special, BLOCK), {"lm_head.bias": torch.zeros(1)})


def test_the_noisy_half_is_what_inference_computes_with_the_clean_blocks_cached(tokenizer) -> None:
    """x_t's block k under the training mask = a forward of [clean blocks < k, noisy block k] under the
    block-causal mask the official model builds at inference (`eval_block_diff_mask`)."""
    shape, special = _shape(len(tokenizer)), special_ids(tokenizer)
    model = _jitter(qwen2_model(shape, special, BLOCK), seed=3)
    clean = _ids(2, 32, len(tokenizer), seed=4)
    noisy, _, _ = block_forward_mask(clean, BLOCK, special["<|mdm_mask|>"], torch.Generator().manual_seed(5))
    with torch.no_grad():
        trained = noisy_logits(model, [noisy], clean, BLOCK)  # [2, 32, V]
        for k in range(4):
            sequence = torch.cat([clean[:, : k * BLOCK], noisy[:, k * BLOCK : (k + 1) * BLOCK]], dim=1)
            blocks = torch.arange(sequence.shape[1]) // BLOCK
            causal_blocks = (blocks[:, None] >= blocks[None, :])[None, None]
            inference = model(input_ids=sequence, attention_mask=causal_blocks).logits[:, -BLOCK:]
            assert torch.allclose(trained[:, k * BLOCK : (k + 1) * BLOCK], inference, atol=1e-5), k


def test_a_shared_clean_copy_gives_the_official_pair_outputs(tokenizer) -> None:
    shape, special = _shape(len(tokenizer)), special_ids(tokenizer)
    model = _jitter(qwen2_model(shape, special, BLOCK), seed=6)
    clean = _ids(3, 32, len(tokenizer), seed=7)
    first, _, _ = block_forward_mask(clean, BLOCK, special["<|mdm_mask|>"], torch.Generator().manual_seed(8))
    second, _, _ = block_forward_mask(clean, BLOCK, special["<|mdm_mask|>"], torch.Generator().manual_seed(9))
    with torch.no_grad():
        shared = noisy_logits(model, [first, second], clean, BLOCK)
        official = torch.cat([noisy_logits(model, [first], clean, BLOCK), noisy_logits(model, [second], clean, BLOCK)])
    assert torch.allclose(shared, official, atol=1e-5)


def test_the_export_is_the_official_format_and_reads_back_as_qwen2(tokenizer, tmp_path: Path) -> None:
    shape, special = _shape(len(tokenizer)), special_ids(tokenizer)
    model = _jitter(qwen2_model(shape, special, BLOCK), seed=10)
    save_block_diffusion(model, tokenizer, tmp_path, special["<|mdm_mask|>"], special["<|endoftext|>"])
    config = json.loads((tmp_path / "config.json").read_text())
    assert set(config) == OFFICIAL_KEYS | {"mask_token_id"}
    assert config["model_type"] == "Fast_dLLM_Qwen" and config["architectures"] == ["Fast_dLLM_QwenForCausalLM"]
    assert (config["bd_size"], config["num_key_value_heads"]) == (BLOCK, shape.num_kv_heads)
    assert config["mask_token_id"] == special["<|mdm_mask|>"] == tokenizer.mask_token_id
    assert config["eos_token_id"] == special["<|endoftext|>"] and config["transformers_version"]
    assert json.loads((tmp_path / "generation_config.json").read_text())["eos_token_id"] == [special["<|endoftext|>"]]
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as reader:
        names = set(reader.keys())
        assert {reader.get_tensor(name).dtype for name in names} == {torch.bfloat16}
    assert {f"model.layers.1.self_attn.{p}_proj.bias" for p in "qkv"} <= names
    assert "model.layers.1.self_attn.o_proj.bias" not in names and "lm_head.weight" in names
    loaded = load_as_qwen2(tmp_path)
    rounded = {name: tensor.to(torch.bfloat16).float() for name, tensor in model.state_dict().items()}
    model.load_state_dict(rounded)
    ids = _ids(2, 32, len(tokenizer), seed=11)
    noisy, _, _ = block_forward_mask(ids, BLOCK, special["<|mdm_mask|>"], torch.Generator().manual_seed(12))
    with torch.no_grad():
        assert torch.allclose(noisy_logits(loaded, [noisy], ids, BLOCK), noisy_logits(model, [noisy], ids, BLOCK), atol=1e-5)
    assert loaded.config.bd_size == BLOCK


def test_the_base_is_a_member_folder_or_a_weights_file_that_says_its_tokens(tokenizer, tmp_path: Path) -> None:
    llama = build_model(_shape(len(tokenizer)), special_ids(tokenizer), seed=0)
    save_llama(llama, tokenizer, tmp_path / "member")
    write_training_log(tmp_path / "member", {"tokens_seen": 1234})
    weights, tokens = read_base(tmp_path / "member")
    assert tokens == 1234 and weights["lm_head.weight"].dtype == torch.float32
    save_file(llama.state_dict(), str(tmp_path / "kept.safetensors"), metadata={"tokens": "4096"})
    assert read_base(tmp_path / "kept.safetensors")[1] == 4096
    save_file(llama.state_dict(), str(tmp_path / "bare.safetensors"))
    with pytest.raises(ValueError, match="tokens it was trained on is unknown"):
        read_base(tmp_path / "bare.safetensors")


@pytest.mark.slow
def test_the_stage_resumes_to_the_same_bytes_and_ships_its_best_evaluation(tokenizer, tmp_path: Path) -> None:
    shape, special = _shape(len(tokenizer)), special_ids(tokenizer)
    save_llama(_jitter(build_model(shape, special, seed=0), seed=1), tokenizer, tmp_path / "base")
    write_training_log(tmp_path / "base", {"tokens_seen": 5000})
    vocab = len(tokenizer)
    data = SimpleNamespace(train=_ids(1, 4000, vocab, 13)[0], heldout=_ids(1, 400, vocab, 14)[0], unigram_entropy_nats=5.0)
    config = TrainConfig(steps=1, batch_size=4, warmup_steps=2, eval_every=3, eval_windows=4, checkpoint_every=3,
                         random_length_share=0.0)  # fmt: skip
    stage = BlockDiffusionStage(base=tmp_path / "base", fine_tune_tokens=6 * 4 * 32, block_size=BLOCK, config=config)

    def run(name: str, **kwargs) -> dict:
        return run_block_diffusion_stage(stage, tmp_path / name, tmp_path / name / "out", tokenizer, data, shape, "c0ffee",
                                         quiet=True, **kwargs)

    whole = run("whole")

    class Interrupt(Exception):
        pass

    def stop_at_3(log, loss) -> None:
        if log.step == 3:
            raise Interrupt

    import miniature.block_diffusion_stage as stage_module

    original = stage_module.train_block_diffusion
    stage_module.train_block_diffusion = lambda *a, **k: original(*a, **{**k, "on_step": stop_at_3})
    try:
        with pytest.raises(Interrupt):
            run("split")
    finally:
        stage_module.train_block_diffusion = original
    assert (tmp_path / "split" / ARCH / CHECKPOINT_FILE).is_file()
    resumed = run("split")
    for name in ("model.safetensors", "config.json", "generation_config.json"):
        a, b = (tmp_path / run_dir / "out" / ARCH / name for run_dir in ("whole", "split"))
        assert a.read_bytes() == b.read_bytes(), name
    best_files = [(tmp_path / run_dir / ARCH / BEST_WEIGHTS_FILE).read_bytes() for run_dir in ("whole", "split")]
    assert best_files[0] == best_files[1]
    logs = [json.loads((tmp_path / d / "out" / ARCH / "training_log.json").read_text()) for d in ("whole", "split")]
    strip = lambda log: [{k: v for k, v in e.items() if k != "wall_s"} for e in log["evaluations"]]  # noqa: E731
    assert strip(logs[0]) == strip(logs[1])
    assert [e["step"] for e in logs[0]["evaluations"]] == [0, 3, 6]
    assert whole["tokens_seen"] == resumed["tokens_seen"] == 5000 + 6 * 4 * 32
    assert (whole["base_tokens"], whole["fine_tune_tokens"]) == (5000, 768)
    best = min(logs[0]["evaluations"], key=lambda e: e["heldout_loss"])
    assert (whole["shipped_step"], whole["heldout_loss_nats"]) == (best["step"], best["heldout_loss"])
    assert whole["heldout_loss_exported_nats"] == pytest.approx(best["heldout_loss"], abs=0.02)  # bf16 storage
    provenance = read_provenance(tmp_path / "whole" / "out" / ARCH)  # what a sweep's report reads
    assert provenance is not None and provenance.arch == ARCH and provenance.heldout_loss_nats == best["heldout_loss"]
    with pytest.raises(ValueError, match="another configuration"):
        run_block_diffusion_stage(dataclasses.replace(stage, config=dataclasses.replace(config, seed=1)),
                                  tmp_path / "split", tmp_path / "x", tokenizer, data, shape, "c0ffee", quiet=True)


def test_the_train_command_refuses_an_empty_fine_tuning_budget(capsys) -> None:
    from miniature.cli import main

    with pytest.raises(SystemExit):
        main(["--bd-tokens", "0"])
    assert "--bd-tokens: must be at least 1" in capsys.readouterr().err
