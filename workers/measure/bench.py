"""Sampler efficiency on CPU: our LLaDA and Dream samplers vs the official algorithms, our decode loop vs
generate().

Three side-by-side comparisons in one run, on small random models (4 layers, d=512 or Dream's d=448, a
BERT-sized vocabulary of 30522, float32, fixed seeds), each asserting that both contenders produce the same
tokens:

  (a) `llada_generate` / `reference_llada_generate` (the per-row transcription of the official sampler);
      goal <= 0.9.
  (b) `ar_generate` / `model.generate(do_sample=False, min_new_tokens=N, max_new_tokens=N)`; goal <= 1.05.
  (c) `dream_generate` / the same with `full_logits` (the official code's LM head over every position, which
      the tests prove token-exact with the official `diffusion_generate`); goal <= 0.95: here the window is
      the 64 generated of 96 positions, so at most a third of the LM head and its softmax is saved.

The two contenders' repetitions are interleaved (the order alternating each round) so that drift in the
machine's speed hits both alike. The table shows each contender's median and the median of the per-round
ratios (ours / baseline, each pair timed back to back), which is what the goal is checked against: on a
shared machine a burst of load then spoils one round, not the comparison. On these small models the LM
head and the vocabulary softmax are a large share of a LLaDA step, so (a) flatters the window optimisation
compared with LLaDA-8B, where the head is ~7% of a step's FLOPs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import transformers
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2ForCausalLM

from specs.registry import preset_shape
from specs.shapes import MINILM_VOCAB_SIZE
from workers.measure.side_by_side import BenchShape, Comparison, interleaved_rounds
from workers.measure.timing import timer_for
from workers.models.dream_model import make_dream_bidirectional
from workers.models.layouts import llama_config_for_shape, qwen2_config_for_shape
from workers.samplers import ar_generate, llada_generate
from workers.samplers.dream.sampler import dream_generate
from workers.samplers.llada.reference import reference_llada_generate

VOCAB_SIZE = MINILM_VOCAB_SIZE
MASK_ID = VOCAB_SIZE - 1  # a synthetic vocabulary: its last id plays [MASK]
EOS_ID = VOCAB_SIZE - 2
PAD_ID = 0
FIRST_TEXT_ID = 1  # prompt tokens are drawn from [FIRST_TEXT_ID, EOS_ID)
LLADA_GOAL = 0.9
AR_GOAL = 1.05
DREAM_GOAL = 0.95


@dataclass(frozen=True)
class BenchConfig(BenchShape):
    """One benchmark configuration; the defaults finish in about two minutes on 2 CPU cores. Prompts shorter
    than `prompt_length` (down to half) are left-padded."""

    warmup: int = 1
    repetitions: int = 5
    ar_warmup: int = 2
    ar_repetitions: int = 15
    threads: int = 0  # 0: every core this process may use


def model_config(*, bidirectional: bool) -> LlamaConfig:
    """The specs' `small` preset (4 layers, d=512): LLaDA's full heads when bidirectional, else LLaMA's GQA."""
    config = llama_config_for_shape(preset_shape("llada" if bidirectional else "llama", "small"))
    config.is_causal = not bidirectional
    config.pad_token_id, config.eos_token_id = PAD_ID, EOS_ID
    return config


def build_model(*, bidirectional: bool, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(model_config(bidirectional=bidirectional)).eval()


def prompts(config: BenchConfig) -> tuple[Tensor, Tensor]:
    """Left-padded random prompts `(ids [B, P], attention_mask [B, P])`, lengths spread over [P/2, P]."""
    gen = torch.Generator().manual_seed(config.seed)
    width = config.prompt_length
    lengths = torch.linspace(width // 2, width, config.batch).round().long().tolist()
    ids = torch.full((config.batch, width), PAD_ID, dtype=torch.long)
    mask = torch.zeros((config.batch, width), dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, width - n :] = torch.randint(FIRST_TEXT_ID, EOS_ID, (n,), generator=gen)
        mask[row, width - n :] = 1
    return ids, mask


def time_side_by_side(
    ours: Callable[[], Tensor], baseline: Callable[[], Tensor], *, warmup: int, repetitions: int
) -> tuple[list[float], list[float], bool]:
    """Interleaved repetitions (order alternating each round); warm-up rounds excluded; raw samples kept."""
    timer = timer_for(torch.device("cpu"))
    outputs: dict[str, Tensor] = {}

    def timed(name: str, contender: Callable[[], Tensor]) -> Callable[[], float]:
        def run() -> float:
            with timer.measure() as interval:
                outputs[name] = contender()
            return interval.seconds()

        return run

    samples = interleaved_rounds(
        {"ours": timed("ours", ours), "baseline": timed("baseline", baseline)}, warmup=warmup, rounds=repetitions
    )
    return samples["ours"], samples["baseline"], torch.equal(outputs["ours"], outputs["baseline"])


def compare_llada(config: BenchConfig, ids: Tensor, mask: Tensor) -> Comparison:
    model = build_model(bidirectional=True, seed=config.seed)
    kw = {
        "gen_length": config.gen_length,
        "block_length": config.block_length,
        "steps": config.steps,
        "mask_id": MASK_ID,
    }
    ours, baseline, equal = time_side_by_side(
        lambda: llada_generate(model, ids, mask, **kw),
        lambda: reference_llada_generate(model, ids, mask, **kw),
        warmup=config.warmup,
        repetitions=config.repetitions,
    )
    return Comparison("llada_generate / official (per-row reference)", ours, baseline, equal, LLADA_GOAL)


def compare_ar(config: BenchConfig, ids: Tensor, mask: Tensor) -> Comparison:
    model = build_model(bidirectional=False, seed=config.seed)
    n_new = config.gen_length

    def generate() -> Tensor:
        with torch.no_grad():
            return model.generate(
                ids, attention_mask=mask, do_sample=False, min_new_tokens=n_new, max_new_tokens=n_new
            )

    ours, baseline, equal = time_side_by_side(
        # generate(min_new_tokens=N) bans EOS for all N steps; the loop does the same through suppression.
        lambda: ar_generate(model, ids, mask, n_new=n_new, logits_suppress_ids=(EOS_ID,)),
        generate,
        warmup=config.ar_warmup,
        repetitions=config.ar_repetitions,
    )
    return Comparison("ar_generate / model.generate()", ours, baseline, equal, AR_GOAL)


def compare_dream(config: BenchConfig, ids: Tensor, mask: Tensor) -> Comparison:
    torch.manual_seed(config.seed)
    qwen2 = qwen2_config_for_shape(preset_shape("dream", "small"))
    qwen2.pad_token_id, qwen2.eos_token_id = PAD_ID, EOS_ID
    model = Qwen2ForCausalLM(qwen2).eval()
    make_dream_bidirectional(model)
    kw = {"attention_mask": mask, "gen_length": config.gen_length, "steps": config.steps, "mask_id": MASK_ID,
          "alg": "entropy"}  # fmt: skip

    def generate(full_logits: bool) -> Tensor:
        with torch.inference_mode():
            return dream_generate(model, ids, full_logits=full_logits, **kw)

    ours, baseline, equal = time_side_by_side(
        lambda: generate(False), lambda: generate(True), warmup=config.warmup, repetitions=config.repetitions
    )
    return Comparison("dream_generate / official (every position's logits)", ours, baseline, equal, DREAM_GOAL)


def report(config: BenchConfig, results: list[Comparison]) -> str:
    """The table: per contender the median seconds, then the paired ratio against its goal."""
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    header = (
        f"{'comparison':<52} {'ours_s':>7} {'base_s':>7} {'ratio':>6} {'(of medians)':>12} {'goal':>7} "
        f"{'tokens':>6}  result"
    )
    lines = [
        f"{versions}, threads {torch.get_num_threads()}",
        "config: " + ", ".join(f"{k}={v}" for k, v in asdict(config).items()),
        "",
        header,
    ]
    for r in results:
        lines.append(
            f"{r.name:<52} {statistics.median(r.ours):7.3f} {statistics.median(r.baseline):7.3f} "
            f"{r.ratio:6.3f} {r.ratio_of_medians:12.3f} {'<= ' + format(r.goal, '.2f'):>7} "
            f"{'equal' if r.tokens_equal else 'DIFFER':>6}  {'ok' if r.met else 'MISSED'}"
        )
    lines.append("")
    lines.append("ratio = median over rounds of ours/baseline timed back to back; raw samples (s):")
    for r in results:
        lines.append(f"  {r.name}: ours {fmt(r.ours)}; baseline {fmt(r.baseline)}")
    return "\n".join(lines)


def fmt(samples: list[float]) -> str:
    return "[" + ", ".join(f"{s:.3f}" for s in samples) + "]"


def main(argv: list[str] | None = None) -> int:
    """Run the comparisons and print the table; exit 1 if tokens differ (--strict: or a goal is missed)."""
    parser = argparse.ArgumentParser(prog="python -m workers.measure.bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repetitions", type=int, default=BenchConfig.repetitions, help="LLaDA's and Dream's measured rounds"
    )
    parser.add_argument(
        "--ar-repetitions", type=int, default=BenchConfig.ar_repetitions, help="AR measured rounds"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all usable cores)")
    parser.add_argument("--strict", action="store_true", help="also fail when a speed goal is missed")
    args = parser.parse_args(argv)
    config = BenchConfig(
        repetitions=args.repetitions, ar_repetitions=args.ar_repetitions, threads=args.threads
    )

    torch.set_num_threads(config.threads or len(os.sched_getaffinity(0)))
    ids, mask = prompts(config)
    results = [compare_llada(config, ids, mask), compare_ar(config, ids, mask), compare_dream(config, ids, mask)]
    print(report(config, results))
    if not all(r.tokens_equal for r in results):
        return 1
    return 0 if all(r.met for r in results) or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
