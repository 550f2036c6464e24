"""Training on a tiny budget: the loss falls, a resumed run equals an uninterrupted one, and each member's
export loads through the benchmark's own loaders to the trained model's logits."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import torch

from miniature.architecture import miniature_shape, parameter_count
from miniature.export import save_llada, save_llama, verify_checksums, write_checksums
from miniature.tokenizer import special_ids, train_tokenizer, unigram_entropy_nats
from miniature.trainer import CHECKPOINT_FILE, TrainConfig, build_model, learning_rate, train
from specs.schema import CheckpointSource, Controls, ModelSpec
from workers.models.loading import load_model

SUBJECTS = ["the parser", "a module", "the interpreter", "each thread", "the logger", "a socket"]
VERBS = ["reads", "writes", "closes", "opens", "checks", "returns"]
OBJECTS = ["the file", "a buffer", "the stream", "every record", "the queue", "a value"]
TAILS = ["before it exits.", "when asked.", "after the call.", "in order."]
TINY_CONFIG = TrainConfig(steps=40, batch_size=8, learning_rate=3e-3, min_learning_rate=3e-4, warmup_steps=5,
                          eval_every=10, eval_windows=8, checkpoint_every=10)  # fmt: skip


def _text(seed: int, sentences: int) -> str:
    rng = random.Random(seed)
    return " ".join(
        f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"
        for _ in range(sentences)
    )


@pytest.fixture(scope="module")
def data():
    train_text, heldout_text = _text(0, 1500), _text(1, 200)
    tokenizer = train_tokenizer([train_text], vocab_size=300)
    special = special_ids(tokenizer)
    encode = lambda text: torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"] + [special["<|endoftext|>"]])  # noqa: E731
    return tokenizer, special, encode(train_text), encode(heldout_text)


def _shape(arch: str, vocab: int):
    return dataclasses.replace(miniature_shape(arch, vocab, hidden_size=64, num_layers=2), context=32)


def test_the_pair_has_equal_parameter_counts_and_differs_as_the_8b_pair_does() -> None:
    llama, llada = miniature_shape("llama", 4099), miniature_shape("llada", 4099)
    assert parameter_count(llama) == parameter_count(llada)
    assert llama.num_kv_heads < llama.num_heads == llada.num_kv_heads  # grouped KV vs full multi-head
    assert llada.intermediate_size < llama.intermediate_size
    special = {"<|endoftext|>": 0, "<|mdm_mask|>": 1, "<|pad|>": 2}
    for shape in (llama, llada):
        built = build_model(shape, special, seed=0)
        assert sum(p.numel() for p in built.parameters()) == parameter_count(shape)


def test_learning_rate_warms_up_then_decays_to_the_floor() -> None:
    config = TrainConfig(steps=100, learning_rate=1.0, min_learning_rate=0.1, warmup_steps=10)
    rates = [learning_rate(config, step) for step in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))
    assert learning_rate(config, 100) == pytest.approx(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_heldout_loss_falls_over_a_few_dozen_steps(arch: str, data, tmp_path: Path) -> None:
    tokenizer, special, train_ids, heldout_ids = data
    _, log = train(_shape(arch, len(tokenizer)), special, train_ids, heldout_ids, TINY_CONFIG, tmp_path)
    losses = [e["heldout_loss"] for e in log.evaluations]
    assert [e["step"] for e in log.evaluations] == [10, 20, 30, 40]
    assert losses[-1] < losses[0] - 0.3, losses
    if arch == "llama":  # LLaDA's bound sits on the unigram plateau for far longer than a few dozen steps
        entropy = unigram_entropy_nats(train_ids.tolist())
        assert losses[-1] < entropy, (losses, entropy)  # it uses context, not only token frequencies


@pytest.mark.slow
def test_a_resumed_run_equals_an_uninterrupted_one(data, tmp_path: Path) -> None:
    tokenizer, special, train_ids, heldout_ids = data
    shape = _shape("llada", len(tokenizer))
    config = dataclasses.replace(TINY_CONFIG, steps=20)
    whole, whole_log = train(shape, special, train_ids, heldout_ids, config, tmp_path / "whole")

    class Interrupt(Exception):
        pass

    def stop_at_10(log, loss):
        if log.step == 10:
            raise Interrupt

    with pytest.raises(Interrupt):
        train(shape, special, train_ids, heldout_ids, config, tmp_path / "split", on_step=stop_at_10)
    assert (tmp_path / "split" / CHECKPOINT_FILE).is_file()
    resumed, resumed_log = train(shape, special, train_ids, heldout_ids, config, tmp_path / "split")
    assert resumed_log.step == 20 and resumed_log.tokens_seen == whole_log.tokens_seen
    for (name, a), (_, b) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="another configuration"):
        train(shape, special, train_ids, heldout_ids, dataclasses.replace(config, seed=1), tmp_path / "split")


def _trained_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """The trained model's logits with its weights rounded to bf16, as stored, computed in float32."""
    rounded = {k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()}
    model.load_state_dict(rounded)
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_export_loads_through_the_benchmark_loader_to_identical_logits(arch: str, data, tmp_path: Path) -> None:
    tokenizer, special, _, _ = data
    shape = _shape(arch, len(tokenizer))
    model = build_model(shape, special, seed=3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # norms away from one, so a swapped tensor would show
    model.eval()
    if arch == "llama":
        save_llama(model, tokenizer, tmp_path)
    else:
        save_llada(model, tokenizer, tmp_path, special["<|mdm_mask|>"], special["<|endoftext|>"])
    write_checksums(tmp_path)
    assert verify_checksums(tmp_path) == []
    ids = torch.randint(3, len(tokenizer), (2, 20), generator=torch.Generator().manual_seed(0))
    expected = _trained_logits(model, ids)
    spec = ModelSpec(name=f"mini-{arch}", arch=arch, source=CheckpointSource(checkpoint=str(tmp_path)))
    loaded = load_model(spec, Controls(dtype="float32", device="cpu"), torch.device("cpu"))
    with torch.no_grad():
        got = loaded.model(input_ids=ids).logits
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5), (got - expected).abs().max()
    if arch == "llada":
        import json

        config = json.loads((tmp_path / "config.json").read_text())
        assert config["model_type"] == "llada" and config["n_kv_heads"] == shape.num_kv_heads
        assert loaded.mask_token_id == special["<|mdm_mask|>"]
        from safetensors import safe_open

        with safe_open(str(tmp_path / "model.safetensors"), "pt") as reader:
            assert "model.transformer.blocks.0.ff_proj.weight" in set(reader.keys())
    (tmp_path / "config.json").write_text((tmp_path / "config.json").read_text() + " ")
    assert verify_checksums(tmp_path) == ["config.json: checksum differs"]


def test_the_token_budget_sets_each_members_step_count() -> None:
    from miniature.pipeline import CONTEXT, TOKEN_BUDGET, default_configs
    from miniature.trainer import step_draw

    configs = default_configs()
    assert (configs["llada"].steps, configs["llama"].steps) == (1600, 1394)  # the shipped pair's
    for arch, config in configs.items():
        seen = [config.batch_size * step_draw(arch, CONTEXT, config, s)[1] for s in range(config.steps)]
        assert sum(seen) >= TOKEN_BUDGET > sum(seen[:-1])  # the fewest steps that hold the budget
    assert sum(32 * step_draw("llada", CONTEXT, configs["llada"], s)[1] for s in range(1600)) == TOKEN_BUDGET


@pytest.mark.slow
def test_every_evaluation_keeps_its_weights_for_the_best_and_for_an_adapted_member(data, tmp_path: Path) -> None:
    from miniature.block_diffusion_stage import BlockDiffusionStage
    from miniature.pipeline import adapted_start, with_rule_base
    from miniature.trainer import best_evaluation, kept_evaluations, load_evaluation_weights

    tokenizer, special, train_ids, heldout_ids = data
    shape = _shape("llama", len(tokenizer))
    config = dataclasses.replace(TINY_CONFIG, steps=20)
    model, log = train(shape, special, train_ids, heldout_ids, config, tmp_path)
    kept = kept_evaluations(tmp_path)
    assert [(k["step"], k["tokens"], k["heldout_loss"]) for k in kept] == [
        (e["step"], e["tokens"], e["heldout_loss"]) for e in log.evaluations]
    final = {name: t.clone() for name, t in model.state_dict().items()}
    assert all(torch.equal(final[n], t) for n, t in load_evaluation_weights(model, tmp_path, 20).state_dict().items())
    earlier = load_evaluation_weights(model, tmp_path, 10).state_dict()
    assert not torch.equal(earlier["model.norm.weight"], final["model.norm.weight"])
    assert best_evaluation(log.evaluations)["heldout_loss"] == min(e["heldout_loss"] for e in log.evaluations)
    # An adapted member that trains the last 10 steps' tokens starts from the weights at step 10.
    budget, at_10 = log.evaluations[-1]["tokens"], log.evaluations[0]["tokens"]
    assert adapted_start(tmp_path, budget - at_10, tokens=budget) == kept[0]["path"]
    with pytest.raises(ValueError, match=f"choose a fine-tuning budget that leaves one of: {at_10}, {budget}"):
        adapted_start(tmp_path, 7, tokens=budget)
    # `llada-bench train`'s block-diffusion stage starts there unless given a base (the AR run in work/llama).
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "llama").symlink_to(tmp_path)
    stage = BlockDiffusionStage(fine_tune_tokens=budget - at_10)
    based = with_rule_base(stage, tmp_path / "work", tokens=budget).base
    assert based is not None and based.resolve() == kept[0]["path"].resolve()
    given = BlockDiffusionStage(base=tmp_path / "elsewhere.safetensors")
    assert with_rule_base(given, tmp_path / "work", tokens=budget) is given
