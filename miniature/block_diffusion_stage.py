"""The block-diffusion stage of `llada-bench train`: adapt the AR member, export it, check the export.

Fast-dLLM v2 adapts Qwen2.5-7B-Instruct with about 1B tokens; the miniature adapts the AR member with
`fine_tune_tokens` of the same corpus. Under the pair's training rule a member adapted from another counts
its base's tokens, so the base is a parameter: the AR run's weights at the tokens that leave room for the
fine-tuning. The exported folder is read back as transformers' Qwen2ForCausalLM and its held-out bound
recomputed from the stored bf16 weights, so the number shipped is the number the checkpoint gives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from miniature.architecture import MiniatureShape
from miniature.block_diffusion import BLOCK_SIZE
from miniature.block_diffusion_export import load_as_qwen2, save_block_diffusion
from miniature.block_diffusion_model import read_base
from miniature.block_diffusion_train import (
    ARCH,
    fine_tune_steps,
    heldout_bound,
    train_block_diffusion,
)
from miniature.export import write_training_log
from miniature.tokenizer import EOS_TOKEN, MASK_TOKEN, special_ids
from miniature.trainer import TrainConfig, TrainingLog, best_evaluation, heldout_windows

# How long the adaptation trains, in training tokens (each window counted once, not once per noisy copy).
# Under the training rule the member starts from the AR run's evaluation at TOKEN_BUDGET − F tokens
# (miniature/pipeline.py): F = 5,707,904 − 4,096,000, the AR evaluation at step 1000. By experiment
# (docs/miniature.md) the held-out bound has left the AR starting point well within this many tokens.
# Whole steps of 32 × 128 tokens hold 1,613,824 of them: 1,920 tokens (0.03%) over the budget.
DEFAULT_FINE_TUNE_TOKENS = 1_611_904
# The optimiser of the pair, at a fine-tuning peak: the base's learning rate is near its floor when the
# adaptation starts, and a first peak of 3e-3 (the pair's) undid more of the AR model than it adapted.
FINE_TUNE_CONFIG = TrainConfig(steps=1, learning_rate=1e-3, min_learning_rate=1e-4, warmup_steps=20,
                               eval_every=25, checkpoint_every=25, random_length_share=0.0)  # fmt: skip
HELDOUT_MEASURE = ("block-diffusion bound: the masked-diffusion bound inside 32-token blocks given the clean "
                   "earlier blocks, token shift kept (upper bound on NLL)")


@dataclass(frozen=True)
class BlockDiffusionStage:
    """What the stage adapts and for how long."""

    # An AR member folder or weights file; None until `llada-bench train` sets it to the AR evaluation the
    # training rule names (pipeline.with_rule_base): the stage itself has no second rule.
    base: Path | None = None
    fine_tune_tokens: int = DEFAULT_FINE_TUNE_TOKENS
    block_size: int = BLOCK_SIZE
    config: TrainConfig = FINE_TUNE_CONFIG


def run_block_diffusion_stage(stage: BlockDiffusionStage, work_dir: Path, out_dir: Path, tokenizer, data,
                              shape: MiniatureShape, corpus_sha256: str, *, quiet: bool = False) -> dict:
    """Train (or resume) the member, write it to `out_dir`/fast_dllm_v2 with its training log; its summary."""
    from tqdm import tqdm

    if stage.base is None:
        raise ValueError("the block-diffusion stage has no base: give --bd-base, or let the training rule choose it")
    base, base_tokens = read_base(stage.base)
    config = replace(stage.config, steps=fine_tune_steps(stage.fine_tune_tokens, stage.config, shape.context))
    special = special_ids(tokenizer)
    bar = tqdm(total=config.steps, desc=f"train {ARCH}", unit="step", disable=quiet, dynamic_ncols=True)

    def on_eval(log: TrainingLog) -> None:
        last = log.evaluations[-1]
        bar.write(f"{ARCH} step {last['step']:>5}  tokens {last['tokens'] / 1e6:6.2f}M  held-out bound "
                  f"{last['heldout_loss']:.4f} nats/token  (unigram entropy {data.unigram_entropy_nats:.4f})  "
                  f"{last['wall_s']:.0f} s")

    try:
        model, log = train_block_diffusion(
            base, base_tokens, shape, special, data.train, data.heldout, config, work_dir / ARCH, stage.block_size,
            on_step=lambda log, loss: bar.update(log.step - bar.n), on_eval=on_eval)
        bar.update(log.step - bar.n)
    finally:
        bar.close()
    target = out_dir / ARCH
    save_block_diffusion(model, tokenizer, target, special[MASK_TOKEN], special[EOS_TOKEN])
    windows = heldout_windows(data.heldout, shape.context, config.eval_windows)
    exported = heldout_bound(load_as_qwen2(target), windows, stage.block_size, special[MASK_TOKEN])
    summary = block_diffusion_summary(log, base_tokens, exported, data.unigram_entropy_nats)
    write_training_log(target, {**log.as_dict(), **summary, "corpus_sha256": corpus_sha256})
    return summary


def block_diffusion_summary(log: TrainingLog, base_tokens: int, exported_loss: float, unigram_entropy: float) -> dict:
    """The numbers a report shows about the member: as the pair's, plus its base and what it shipped."""
    best = best_evaluation(log.evaluations)
    return {
        "parameters": log.parameters,
        "steps": log.step,
        "tokens_seen": log.tokens_seen,
        "base_tokens": base_tokens,
        "fine_tune_tokens": log.tokens_seen - base_tokens,
        "wall_s": round(log.wall_s, 1),
        "shipped_step": best["step"],
        "shipped_tokens": best["tokens"],
        "heldout_loss_nats": best["heldout_loss"],
        "heldout_loss_exported_nats": exported_loss,
        "base_heldout_loss_nats": log.evaluations[0]["heldout_loss"],
        "heldout_measure": HELDOUT_MEASURE,
        "unigram_entropy_nats": unigram_entropy,
        "seed": log.config["seed"],
    }
