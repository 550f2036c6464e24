"""PyTorch against llama.cpp, each side of the shipped miniature pair, timed side by side in one run.

    python -m workers.measure.bench_engine [--rounds 5] [--threads 1]

LLaMA generates 32 new tokens greedily from 32-token prompts of the shipped data at B = 1, 4 and 16: this package's
decode loop over transformers against llama.cpp's. LLaDA generates 32 tokens in one block of 32 at 4 and 16 steps,
B = 1 and 4: the package's sampler with transformers' forward against the same sampler with llama.cpp's forward.
Each contender runs the exact code a sweep's run does (`scenario.generate_untimed` with the engine specs/engine.yaml
plans), on the same prompts, and each comparison checks that both give the same tokens. The ratio is PyTorch's time
over llama.cpp's (> 1: llama.cpp faster), the median over rounds of the two timed back to back (side_by_side.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from specs.engines import LLAMA_CPP, engine_missing
from specs.schema import RunConfig
from workers.measure.side_by_side import Comparison, interleaved_rounds

ENGINE_SPEC = Path(__file__).resolve().parents[2] / "specs" / "engine.yaml"
AR_BATCHES = (1, 4, 16)
LLADA_POINTS = ((4, 1), (4, 4), (16, 1), (16, 4))  # (steps, batch)


def _configs() -> dict[tuple[str, str, int, int | None], RunConfig]:
    """The engine spec's first-session configs by (arch, engine, batch, steps)."""
    from orchestrator.plan import plan_runs
    from specs.loader import load_spec

    return {(p.config.model.arch, p.config.engine, p.config.batch_size, p.config.steps): p.config
            for p in plan_runs(load_spec(ENGINE_SPEC)) if p.config.session in (None, 0)}


def _timed(call: Callable[[], torch.Tensor], out: list[torch.Tensor]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        out.append(call())
        return time.perf_counter() - start
    return run


def compare(name: str, pytorch: Callable[[], torch.Tensor], llama_cpp: Callable[[], torch.Tensor], *, rounds: int
            ) -> Comparison:
    tokens: dict[str, list[torch.Tensor]] = {"pytorch": [], "llama.cpp": []}
    samples = interleaved_rounds({"pytorch": _timed(pytorch, tokens["pytorch"]),
                                  "llama.cpp": _timed(llama_cpp, tokens["llama.cpp"])}, warmup=1, rounds=rounds)
    equal = all(torch.equal(a, b) for a, b in zip(tokens["pytorch"], tokens["llama.cpp"], strict=True))
    return Comparison(name, samples["pytorch"], samples["llama.cpp"], equal)


def comparisons(rounds: int) -> list[Comparison]:
    from workers.engine.llama_cpp_engine import LlamaCppEngine
    from workers.measure.scenario import generate_untimed
    from workers.models.loading import load_model
    from workers.models.tokenization import model_input_ids
    from workers.prompts import load_prompt_examples

    configs = _configs()
    results = []
    for arch, points in (("llama", [(None, b) for b in AR_BATCHES]), ("llada", LLADA_POINTS)):
        some = next(c for (a, _, _, _), c in configs.items() if a == arch)
        loaded = load_model(some.model, some.controls, torch.device("cpu"))
        engine = LlamaCppEngine.open(loaded, some.controls.dtype)
        examples = load_prompt_examples(some.prompts, loaded.tokenizer, some.prompt_length, some.generation_length,
                                        some.prompt_ids)
        for steps, batch in points:
            torch_config, engine_config = configs[(arch, "pytorch", batch, steps)], configs[(arch, LLAMA_CPP, batch, steps)]
            ids = model_input_ids(loaded.tokenizer, [e.prompt_ids for e in examples[:batch]], False, torch.device("cpu"))
            what = f"{arch} B={batch}" + (f" K={steps}" if steps else "") + f", {ids.shape[1]}+{some.generation_length}"
            results.append(compare(
                what,
                lambda c=torch_config, x=ids: generate_untimed(loaded, c, x, seed=0, temperature=0.0),
                lambda c=engine_config, x=ids: generate_untimed(loaded, c, x, seed=0, temperature=0.0, engine=engine),
                rounds=rounds,
            ))
    return results


def report(results: list[Comparison], threads: int) -> str:
    lines = [f"PyTorch {torch.__version__} against llama.cpp (llama-cpp-python), float32, {threads} thread(s) each",
             "", f"{'generation':<28} {'pytorch_s':>9} {'llama.cpp_s':>11} {'pytorch/llama.cpp':>17} {'tokens':>6}"]
    for r in results:
        lines.append(f"{r.name:<28} {statistics.median(r.ours):9.4f} {statistics.median(r.baseline):11.4f} "
                     f"{r.ratio:17.2f} {'equal' if r.tokens_equal else 'DIFFER':>6}")
    lines += ["", "ratio = median over rounds of PyTorch's seconds / llama.cpp's, timed back to back (> 1: llama.cpp "
              "faster); raw samples (s):"]
    lines += [f"  {r.name}: pytorch {[round(s, 4) for s in r.ours]}; llama.cpp {[round(s, 4) for s in r.baseline]}"
              for r in results]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.measure.bench_engine", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds per comparison (one warm-up before)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both engines (the sweeps' workers use 1)")
    args = parser.parse_args(argv)
    problem = engine_missing(LLAMA_CPP)
    if problem:
        print(f"engine bench skipped: {problem}")
        return 0
    torch.set_num_threads(args.threads)
    results = comparisons(args.rounds)
    print(report(results, args.threads))
    return 0 if all(r.tokens_equal for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
