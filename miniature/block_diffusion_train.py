"""Fine-tune the AR member into the block-diffusion member: Fast-dLLM v2's recipe on the miniature corpus.

The loop is the pair's (miniature/trainer.py): windows of the training stream drawn from a generator seeded
by (seed, step), AdamW with warm-up and cosine decay, float32 on the CPU, a held-out evaluation every
`eval_every` steps and an atomic checkpoint to resume from, so an interrupted run ends byte for byte where an
uninterrupted one does. What differs is the start (the AR weights, q/k/v biases at zero), the objective
(miniature/block_diffusion.py: per-block noise, complementary pairs, the token shift) and the count of
tokens: the member counts its base's, so its log starts at the base's tokens. It ships the weights of its
evaluation with the lowest held-out bound, kept as they are evaluated.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen2ForCausalLM

from miniature.architecture import MiniatureShape
from miniature.block_diffusion import (
    block_diffusion_bound,
    block_diffusion_loss,
    block_forward_mask,
    complementary_pair,
)
from miniature.block_diffusion_model import adapt, noisy_logits, qwen2_model
from miniature.trainer import (
    CHECKPOINT_FILE,
    HELDOUT_BOUND_DRAWS,
    TrainConfig,
    TrainingLog,
    heldout_windows,
    optimizer_step,
    resume,
    sample_windows,
    save_state,
)

ARCH = "fast_dllm_v2"  # the member's name in the training log and the shipped folder
BEST_WEIGHTS_FILE = "best.safetensors"  # the weights of the evaluation with the lowest held-out bound so far


def fine_tune_steps(tokens: int, config: TrainConfig, context: int) -> int:
    """The fewest steps of `batch_size` full windows that hold `tokens` training tokens."""
    return max(1, math.ceil(tokens / (config.batch_size * context)))


def weights_sha256(weights: dict[str, torch.Tensor]) -> str:
    """A digest of the base's float32 weights, name by name: a resumed run refuses another base."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].float().contiguous().numpy().tobytes())
    return digest.hexdigest()


def pair_loss(model: Qwen2ForCausalLM, ids: torch.Tensor, block_size: int, mask_id: int, generator: torch.Generator) -> torch.Tensor:
    """One training batch's loss: each window with its mask and with the complement, one shared x_0."""
    # ids [B, L]
    _, masked, _ = block_forward_mask(ids, block_size, mask_id, generator)
    noisy, both = complementary_pair(ids, masked, mask_id)  # [2B, L]
    logits = noisy_logits(model, list(noisy.chunk(2)), ids, block_size)  # [2B, L, V]
    return block_diffusion_loss(logits, ids.repeat(2, 1), both)


@torch.no_grad()
def heldout_bound(model: Qwen2ForCausalLM, windows: torch.Tensor, block_size: int, mask_id: int, batch: int = 16) -> float:
    """The block-diffusion bound per token (miniature/block_diffusion.py) over the held-out windows, with the
    same fixed masking draws at every evaluation (comparable across evaluations and with LLaDA's)."""
    model.eval()
    total = 0.0
    for draw in range(HELDOUT_BOUND_DRAWS):
        generator = torch.Generator().manual_seed(10_000 + draw)
        for start in range(0, windows.shape[0], batch):
            chunk = windows[start : start + batch]  # [n, L]
            noisy, masked, p_mask = block_forward_mask(chunk, block_size, mask_id, generator)
            logits = noisy_logits(model, [noisy], chunk, block_size)
            total += float(block_diffusion_bound(logits, chunk, masked, p_mask)) * chunk.shape[0]
    model.train()
    return total / (HELDOUT_BOUND_DRAWS * windows.shape[0])


def save_weights(path: Path, model: Qwen2ForCausalLM) -> None:
    """Atomic, like the checkpoint. One metadata key: safetensors writes several in no fixed order, and the
    file's bytes must repeat (the log says which step it holds)."""
    temporary = path.with_suffix(".tmp")
    save_file({name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()},
              str(temporary), metadata={"format": "pt"})
    with temporary.open("rb") as handle:
        os.fsync(handle.fileno())
    temporary.replace(path)


def train_block_diffusion(
    base: dict[str, torch.Tensor],
    base_tokens: int,
    shape: MiniatureShape,
    special: dict[str, int],
    train_stream: torch.Tensor,
    heldout_stream: torch.Tensor,
    config: TrainConfig,
    work_dir: Path,
    block_size: int,
    on_step: Callable[[TrainingLog, float], None] = lambda log, loss: None,
    on_eval: Callable[[TrainingLog], None] = lambda log: None,
) -> tuple[Qwen2ForCausalLM, TrainingLog]:
    """Fine-tune `base` for `config.steps` steps, resuming from `work_dir`'s checkpoint when one is there;
    returns the model with the weights of its best evaluation, and the log."""
    work_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    model = adapt(qwen2_model(shape, special, block_size), base)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, betas=(0.9, 0.95), weight_decay=config.weight_decay
    )
    recipe = {**asdict(config), "block_size": block_size, "complementary_mask": True, "token_shift": True,
              "base_tokens": base_tokens, "base_sha256": weights_sha256(base)}
    log = TrainingLog(ARCH, shape.as_dict(), recipe, sum(p.numel() for p in model.parameters()), tokens_seen=base_tokens)
    state_path, best_path = work_dir / CHECKPOINT_FILE, work_dir / BEST_WEIGHTS_FILE
    log = resume(state_path, model, optimizer, log)  # the base is part of the configuration
    mask_id = special["<|mdm_mask|>"]
    windows = heldout_windows(heldout_stream, shape.context, config.eval_windows)

    def evaluate(running: float | None) -> None:
        loss = heldout_bound(model, windows, block_size, mask_id)
        if all(loss < e["heldout_loss"] for e in log.evaluations):
            save_weights(best_path, model)
        log.evaluations.append({"step": log.step, "tokens": log.tokens_seen, "wall_s": round(log.wall_s, 2),
                                "heldout_loss": loss, "train_loss": running})
        on_eval(log)

    started = time.perf_counter() - log.wall_s
    if not log.evaluations:  # the AR model's own bound: where the fine-tuning starts from
        evaluate(None)
    model.train()
    # the running train loss as it was at the checkpoint (checkpoints fall on evaluations), so a resumed log
    # records the same train losses as an uninterrupted one
    running = log.evaluations[-1]["train_loss"] if log.evaluations[-1]["step"] == log.step else None
    while log.step < config.steps:
        step = log.step
        generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
        ids = sample_windows(train_stream, config.batch_size, shape.context, generator)
        loss = pair_loss(model, ids, block_size, mask_id, generator)
        value = optimizer_step(model, optimizer, loss, config, log, ids.numel(), started)
        running = value if running is None else 0.98 * running + 0.02 * value
        last = log.step == config.steps
        if log.step % config.eval_every == 0 or last:
            evaluate(running)
        if log.step % config.checkpoint_every == 0 or last:
            save_state(state_path, model, optimizer, log)
        on_step(log, value)  # after the checkpoint: an interrupt here loses no finished step
    model.load_state_dict(load_file(str(best_path)))
    model.eval()
    return model, log
