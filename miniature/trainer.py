"""One model's training loop: batches from the token stream, AdamW with warm-up and cosine decay, bf16
autocast on CPU, held-out evaluation, and a checkpoint to resume from after any interruption.

Each step draws its batch from a generator seeded by (seed, step), so a resumed run sees exactly the
batches an uninterrupted one would have seen; only the model, the optimizer and the log are saved.
The weights at every held-out evaluation are kept too (`evaluations/step-NNNNNN.safetensors`, float32):
the member ships the one with the best held-out loss, and a member adapted from this one starts from them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import LlamaForCausalLM

from miniature.architecture import MiniatureShape, llama_config
from miniature.objectives import forward_mask, masked_diffusion_loss, next_token_loss
from workers.models.llada_model import make_bidirectional

CHECKPOINT_FILE = "training-state.pt"
EVALUATIONS_DIR = "evaluations"  # one float32 weights file per held-out evaluation
HELDOUT_BOUND_DRAWS = 4  # masking draws per held-out window for LLaDA's bound (fixed seeds: comparable evals)


@dataclass(frozen=True)
class TrainConfig:
    """How one member of the pair is trained (recorded verbatim in its training log)."""

    steps: int
    batch_size: int = 32
    learning_rate: float = 3e-3
    min_learning_rate: float = 3e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_windows: int = 64
    checkpoint_every: int = 100
    random_length_share: float = 0.3  # LLaDA: batches cropped to a random length, so short windows are in distribution
    min_random_length: int = 16
    seed: int = 0
    # bf16 autocast on a CPU without AVX512-BF16 or AMX is emulated: 20x slower than float32 on the
    # reference 2-core machine (AVX2 only), so the pair trains in float32 and is stored in bf16.
    autocast_bf16: bool = False


@dataclass
class TrainingLog:
    """What a shipped model says about how it was made."""

    arch: str
    shape: dict[str, object]
    config: dict[str, object]
    parameters: int
    step: int = 0
    tokens_seen: int = 0
    wall_s: float = 0.0
    evaluations: list[dict[str, float]] = field(default_factory=list)  # step, tokens, wall_s, heldout_loss, train_loss

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def build_model(shape: MiniatureShape, special: dict[str, int], seed: int) -> LlamaForCausalLM:
    """The member in float32 (autocast supplies bf16 matmuls), initialised from `seed`."""
    torch.manual_seed(seed)
    config = llama_config(shape, special)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config)
    if shape.arch == "llada":
        make_bidirectional(model)
    return model


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to the floor at the last step."""
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return config.min_learning_rate + (config.learning_rate - config.min_learning_rate) * cosine


def step_draw(arch: str, context: int, config: TrainConfig, step: int) -> tuple[torch.Generator, int]:
    """The generator of `step` and its batch's sequence length (LLaDA crops a share of batches at random)."""
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
    length = context
    if arch == "llada" and torch.rand((), generator=generator) < config.random_length_share:
        length = int(torch.randint(config.min_random_length, context + 1, (), generator=generator))
    return generator, length


def steps_for_tokens(arch: str, context: int, config: TrainConfig, tokens: int) -> int:
    """The fewest steps whose batches hold at least `tokens` tokens: a token budget as a step count.

    The count follows the same seeded draws as training, so a member's cropped batches are counted as
    trained; it does not depend on `config.steps`."""
    seen, step = 0, 0
    while seen < tokens:
        seen += config.batch_size * step_draw(arch, context, config, step)[1]
        step += 1
    return step


def sample_windows(stream: torch.Tensor, batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """`batch` random windows of `length` tokens from a 1-D token stream: [B, length]."""
    starts = torch.randint(0, stream.numel() - length, (batch,), generator=generator)
    return torch.stack([stream[s : s + length] for s in starts.tolist()])


def heldout_windows(stream: torch.Tensor, length: int, count: int) -> torch.Tensor:
    """The first `count` non-overlapping windows of the held-out stream: [N, length], fixed across evals."""
    usable = min(count, stream.numel() // length)
    if usable == 0:
        raise ValueError(f"held-out stream of {stream.numel()} tokens is shorter than one {length}-token window")
    return stream[: usable * length].view(usable, length)


def optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor, config: TrainConfig,
                   log: TrainingLog, tokens: int, started: float) -> float:
    """One AdamW step on `loss` at the schedule's rate for `log.step`, gradients clipped; the log advanced by one
    step of `tokens` tokens and its wall time (since `started`) updated. Returns the loss's value."""
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(config, log.step)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    log.step, log.tokens_seen = log.step + 1, log.tokens_seen + tokens
    log.wall_s = time.perf_counter() - started
    return float(loss.detach())


def training_loss(model: LlamaForCausalLM, ids: torch.Tensor, arch: str, mask_id: int, generator: torch.Generator) -> torch.Tensor:
    if arch == "llama":
        return next_token_loss(model(input_ids=ids).logits, ids)
    noisy, masked, p_mask = forward_mask(ids, mask_id, generator)
    return masked_diffusion_loss(model(input_ids=noisy).logits, ids, masked, p_mask)


@torch.no_grad()
def heldout_loss(model: LlamaForCausalLM, windows: torch.Tensor, arch: str, mask_id: int, autocast: bool, batch: int = 16) -> float:
    """AR: cross-entropy per predicted token. LLaDA: the masked bound per token (fixed masking draws)."""
    model.eval()
    total, count = 0.0, 0
    draws = 1 if arch == "llama" else HELDOUT_BOUND_DRAWS
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        for draw in range(draws):
            generator = torch.Generator().manual_seed(10_000 + draw)
            for start in range(0, windows.shape[0], batch):
                chunk = windows[start : start + batch]
                total += float(training_loss(model, chunk, arch, mask_id, generator)) * chunk.shape[0]
                count += chunk.shape[0]
    model.train()
    return total / count


def evaluation_weights_path(work_dir: Path, step: int) -> Path:
    """Where a member trained in `work_dir` keeps its weights as they were at the evaluation of `step`."""
    return work_dir / EVALUATIONS_DIR / f"step-{step:06d}.safetensors"


def save_evaluation_weights(path: Path, model: LlamaForCausalLM, evaluation: dict[str, float]) -> None:
    """Atomic, like the checkpoint; the evaluation (step, tokens, held-out loss) rides in the file's metadata."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    metadata = {"format": "pt", **{key: repr(value) for key, value in evaluation.items()}}
    save_file({name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()},
              str(temporary), metadata=metadata)
    temporary.replace(path)


def kept_evaluations(work_dir: Path) -> list[dict[str, float]]:
    """The evaluations whose weights a member trained in `work_dir` kept, in step order, each with its `path`."""
    from safetensors import safe_open

    kept = []
    for path in sorted((work_dir / EVALUATIONS_DIR).glob("step-*.safetensors")):
        with safe_open(str(path), "pt") as reader:
            metadata = reader.metadata()
        kept.append({"step": int(metadata["step"]), "tokens": int(metadata["tokens"]),
                     "heldout_loss": float(metadata["heldout_loss"]), "path": path})
    return kept


def load_evaluation_weights(model: LlamaForCausalLM, work_dir: Path, step: int) -> LlamaForCausalLM:
    """`model` with the weights it had at the evaluation of `step` (a missing file is an error naming it)."""
    from safetensors.torch import load_file

    path = evaluation_weights_path(work_dir, step)
    if not path.is_file():
        raise ValueError(f"{path}: the weights of the evaluation at step {step} are missing; remove "
                         f"{work_dir} to retrain this member")
    model.load_state_dict(load_file(str(path)))
    return model


def best_evaluation(evaluations: list[dict[str, float]]) -> dict[str, float]:
    """The evaluation with the lowest held-out loss; the earliest among equals (fewer tokens for the same loss)."""
    if not evaluations:
        raise ValueError("no held-out evaluation to choose from: train at least `eval_every` steps")
    return min(evaluations, key=lambda evaluation: (evaluation["heldout_loss"], evaluation["step"]))


def save_state(path: Path, model: LlamaForCausalLM, optimizer: torch.optim.Optimizer, log: TrainingLog) -> None:
    """Atomic: a kill mid-write leaves the previous checkpoint whole."""
    temporary = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "log": log.as_dict()}, temporary)
    with temporary.open("rb") as handle:
        os.fsync(handle.fileno())
    temporary.replace(path)


def resume(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, log: TrainingLog) -> TrainingLog:
    """The checkpoint's model, optimizer and log when `path` holds one of this configuration (`log`'s config
    and shape), else `log` unchanged; a checkpoint of another configuration is an error."""
    if not path.is_file():
        return log
    state = torch.load(path, weights_only=False)
    if state["log"]["config"] != log.config or state["log"]["shape"] != log.shape:
        raise ValueError(f"{path}: a checkpoint of another configuration; remove it to start afresh")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return TrainingLog(**state["log"])


def train(
    shape: MiniatureShape,
    special: dict[str, int],
    train_stream: torch.Tensor,
    heldout_stream: torch.Tensor,
    config: TrainConfig,
    work_dir: Path,
    on_step: Callable[[TrainingLog, float], None] = lambda log, loss: None,
    on_eval: Callable[[TrainingLog], None] = lambda log: None,
) -> tuple[LlamaForCausalLM, TrainingLog]:
    """Train one member to `config.steps`, resuming from `work_dir`'s checkpoint when one is there."""
    work_dir.mkdir(parents=True, exist_ok=True)
    model = build_model(shape, special, config.seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, betas=(0.9, 0.95), weight_decay=config.weight_decay
    )
    log = TrainingLog(shape.arch, shape.as_dict(), asdict(config), sum(p.numel() for p in model.parameters()))
    state_path = work_dir / CHECKPOINT_FILE
    log = resume(state_path, model, optimizer, log)
    mask_id = special["<|mdm_mask|>"]
    windows = heldout_windows(heldout_stream, shape.context, config.eval_windows)
    model.train()
    running = None
    started = time.perf_counter() - log.wall_s
    while log.step < config.steps:
        step = log.step
        generator, length = step_draw(shape.arch, shape.context, config, step)
        ids = sample_windows(train_stream, config.batch_size, length, generator)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.autocast_bf16):
            loss = training_loss(model, ids, shape.arch, mask_id, generator)
        value = optimizer_step(model, optimizer, loss, config, log, ids.numel(), started)
        running = value if running is None else 0.98 * running + 0.02 * value
        last = log.step == config.steps
        if log.step % config.eval_every == 0 or last:
            log.evaluations.append({
                "step": log.step, "tokens": log.tokens_seen, "wall_s": round(log.wall_s, 2),
                "heldout_loss": heldout_loss(model, windows, shape.arch, mask_id, config.autocast_bf16),
                "train_loss": running,
            })  # fmt: skip
            save_evaluation_weights(evaluation_weights_path(work_dir, log.step), model, log.evaluations[-1])
            on_eval(log)
        if log.step % config.checkpoint_every == 0 or last:
            save_state(state_path, model, optimizer, log)
        on_step(log, value)  # after the checkpoint: an interrupt here loses no finished step
    model.eval()
    return model, log
