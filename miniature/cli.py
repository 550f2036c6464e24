"""`llada-bench train`: build the miniature pair from scratch (or resume), then compare with the shipped one."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from miniature.block_diffusion_stage import DEFAULT_FINE_TUNE_TOKENS, BlockDiffusionStage
from miniature.corpus import CorpusError
from miniature.pipeline import (
    CONTEXT,
    DEFAULT_OUT_DIR,
    DEFAULT_WORK_DIR,
    TOKEN_BUDGET,
    compare_heldout,
    default_configs,
    run_pipeline,
)
from miniature.train_args import check_arguments

# Retraining on the same corpus, seed and thread count repeats the run; float reductions may still
# differ across CPUs and thread counts, which moves the final held-out loss by far less than this.
REPRODUCTION_TOLERANCE_NATS = 0.05
SHIPPED_PAIR = Path("models/miniature")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="llada-bench train",
        description="Train the miniature LLaMA/LLaDA pair and the block-diffusion member: corpus (Debian's "
        "python3.11-doc) → tokenizer → both models → the AR model adapted to block diffusion (Fast-dLLM v2). "
        "Resumable: run the same command again after an interruption.",
    )
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help=f"intermediate files and checkpoints (default {DEFAULT_WORK_DIR})")
    parser.add_argument("--out", type=Path, default=DEFAULT_WORK_DIR / "pair", help="where the trained pair is written "
                        f"(default {DEFAULT_WORK_DIR}/pair; the shipped pair lives in {DEFAULT_OUT_DIR})")
    parser.add_argument("--deb", type=Path, help="a python3.11-doc .deb already downloaded (default: apt-get download)")
    parser.add_argument("--deb-version", help="the package version to download, e.g. 3.11.2-6+deb12u9")
    parser.add_argument("--tokens", type=int, default=TOKEN_BUDGET, help=f"every member's training-token budget "
                        f"(default {TOKEN_BUDGET}: the training rule); each member's step count follows from it")
    parser.add_argument("--llama-steps", type=int, help="AR training steps (default: as many as the budget needs)")
    parser.add_argument("--llada-steps", type=int, help="LLaDA training steps (default: as many as the budget needs)")
    parser.add_argument("--compare", type=Path, default=SHIPPED_PAIR, help=f"a pair whose held-out losses to compare with (default {SHIPPED_PAIR})")
    parser.add_argument("--bd-base", type=Path, help="the AR weights the block-diffusion member is adapted from: a member "
                        "folder or a .safetensors file with `tokens` in its metadata (default: the AR run's weights kept at its "
                        "evaluation at the token budget less --bd-tokens, as the training rule asks)")
    parser.add_argument("--bd-tokens", type=int, default=DEFAULT_FINE_TUNE_TOKENS,
                        help=f"the block-diffusion member's fine-tuning tokens (default {DEFAULT_FINE_TUNE_TOKENS})")
    args = parser.parse_args(argv)
    if args.tokens < 1:
        parser.error("--tokens: must be at least 1")
    configs = default_configs(args.tokens)
    for arch, steps in (("llama", args.llama_steps), ("llada", args.llada_steps)):
        if steps is not None:
            if steps < 1:
                parser.error(f"--{arch}-steps: must be at least 1")
            configs[arch] = dataclasses.replace(configs[arch], steps=steps)
    if args.bd_tokens < 1:
        parser.error("--bd-tokens: must be at least 1")
    block_diffusion = BlockDiffusionStage(base=args.bd_base, fine_tune_tokens=args.bd_tokens)
    try:
        check_arguments(deb=args.deb, tokens=args.tokens, fine_tune_tokens=args.bd_tokens, bd_base=args.bd_base,
                        ar_config=configs["llama"], context=CONTEXT, work_dir=args.work_dir, out=args.out)
        provenance = run_pipeline(args.work_dir, args.out, configs, deb=args.deb, deb_version=args.deb_version,
                                  block_diffusion=block_diffusion, tokens=args.tokens)
    except (CorpusError, ValueError) as exc:  # ValueError: an argument, or a checkpoint of another configuration
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: run the same command again to resume from the last checkpoint in {args.work_dir} "
              f"(--out {args.out} is written only at the end)", file=sys.stderr)
        return 130
    print(f"wrote the pair to {args.out}")
    for arch, summary in provenance["models"].items():
        print(f"  {arch}: {summary['parameters'] / 1e6:.2f}M parameters, {summary['tokens_seen'] / 1e6:.2f}M tokens, "
              f"{summary['wall_s'] / 60:.1f} min, shipped at step {summary['shipped_step']}: "
              f"held-out {summary['heldout_loss_nats']:.4f} nats/token "
              f"(unigram entropy {summary['unigram_entropy_nats']:.4f})")
    if args.compare.resolve() != args.out.resolve():
        lines = compare_heldout(provenance, args.compare, REPRODUCTION_TOLERANCE_NATS)
        for line in lines:
            print(f"  {line}")
        if any("OUTSIDE" in line for line in lines):
            return 1
    return 0
