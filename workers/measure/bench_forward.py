"""Time per forward on this machine, eager against compiled (CUDA-graph-captured on a GPU), side by side.

What it times is the forward's interval on the timer of the device (workers/measure/timing.py): on a CPU the
wall time, where host and device are one; on a GPU CUDA events, the device's timeline, which is max(the host's
dispatch, the device's work) and not host time (the host floor's own measurement is
workers/measure/calibrate.py `host_seconds`).

Eager PyTorch pays a host cost per forward (module calls, one dispatch per operator) whatever the forward
computes; on the miniature models on a CPU that cost is most of a forward. This puts each model's step
forward, eager and compiled, in the same process, the rounds interleaved (order alternating) so that drift
in the machine's speed hits both alike, and reports the median over rounds of compiled / eager, each pair
timed back to back:

  * LLaMA: one decode forward (the mean ITL of a generation of `gen_length` tokens, batch 1), the eager
    loop over the preallocated cache against the compiled step (`decode_attention: live`);
  * LLaDA: one diffusion step (the mean step of a generation), vanilla and dual cache, each eager against
    its `graph` variant (inductor on a CPU, a replayed CUDA graph on a GPU).

Each comparison also checks that both contenders gave the same tokens. Compilation (capture) happens in an
untimed warm-up round and is reported on its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

from specs.paths import PACKAGE_ROOT
from specs.schema import Controls, ModelSpec
from workers.measure.side_by_side import BenchShape, Comparison, interleaved_rounds
from workers.measure.timing import timer_for
from workers.models.loading import LoadedModel, load_model
from workers.samplers import ar_steps, llada_steps
from workers.samplers.compiled import CompiledDecode
from workers.samplers.llada.graphs import LladaGraphs

MINIATURE = PACKAGE_ROOT / "models" / "miniature"


@dataclass(frozen=True)
class ForwardBench(BenchShape):
    """The shapes timed; the defaults finish in a few minutes on 2 CPU cores, compilation included."""

    batch: int = 1
    block_length: int = 32
    steps: int = 16
    rounds: int = 7


@dataclass(frozen=True)
class ForwardComparison(Comparison):
    """Per-forward seconds, compiled (`ours`) against eager (`baseline`), and the untimed preparation."""

    preparation_s: float = 0.0


def load_miniature(arch: str, device: torch.device) -> LoadedModel:
    spec = ModelSpec(name=f"{arch}-mini", arch=arch, source={"checkpoint": str(MINIATURE / arch)})
    return load_model(spec, Controls(dtype="float32", device=device.type), device)


def prompt(loaded: LoadedModel, config: ForwardBench) -> torch.Tensor:
    """Random ids `[B, P]` away from the special tokens at either end of the vocabulary, none of them [MASK]."""
    generator = torch.Generator().manual_seed(config.seed)
    ids = torch.randint(8, int(loaded.model.config.vocab_size) - 8, (config.batch, config.prompt_length), generator=generator)
    if loaded.mask_token_id is not None:
        ids[ids == loaded.mask_token_id] = 8 if loaded.mask_token_id != 8 else 9
    return ids.to(loaded.device)


def per_forward_s(run: Callable[[Callable[[], object]], torch.Tensor], device: torch.device) -> tuple[float, torch.Tensor]:
    """Mean seconds of the forwards `run` times (it wraps each in `measure`), and the tokens it produced."""
    timer = timer_for(device)
    intervals = []

    def measure(step: Callable[[], object]) -> None:
        with timer.measure() as interval:
            step()
        intervals.append(interval)

    tokens = run(measure)
    timer.synchronize()
    seconds = [interval.seconds() for interval in intervals]
    return sum(seconds) / len(seconds), tokens


def side_by_side(
    name: str, eager: Callable[[Callable], torch.Tensor], compiled: Callable[[Callable], torch.Tensor],
    preparation_s: Callable[[], float], device: torch.device, rounds: int,
) -> ForwardComparison:  # fmt: skip
    """One untimed round of each (compiles), then `rounds` interleaved rounds."""
    _, eager_tokens = per_forward_s(eager, device)
    _, compiled_tokens = per_forward_s(compiled, device)
    samples = interleaved_rounds(
        {"eager": lambda: per_forward_s(eager, device)[0], "compiled": lambda: per_forward_s(compiled, device)[0]},
        warmup=0, rounds=rounds,
    )  # fmt: skip
    equal = torch.equal(eager_tokens, compiled_tokens)
    return ForwardComparison(name, samples["compiled"], samples["eager"], equal, preparation_s=preparation_s())


def compare_llama(loaded: LoadedModel, config: ForwardBench) -> ForwardComparison:
    ids = prompt(loaded, config)
    step = CompiledDecode(
        loaded.model, batch=config.batch, capacity=config.prompt_length + config.gen_length, decode_attention="live"
    )

    def run(measure: Callable, compiled: CompiledDecode | None) -> torch.Tensor:
        with torch.inference_mode():
            decoder = ar_steps(loaded.model, ids, n_new=config.gen_length, compiled=compiled)
            next(decoder)  # the prefill: not a decode forward
            while not decoder.done:
                measure(lambda: next(decoder))
            return decoder.tokens.cpu()

    return side_by_side(
        "LLaMA decode forward (live attention)", lambda m: run(m, None), lambda m: run(m, step),
        lambda: step.preparation.seconds, loaded.device, config.rounds,
    )  # fmt: skip


def compare_llada(loaded: LoadedModel, config: ForwardBench, cache: str) -> ForwardComparison:
    ids = prompt(loaded, config)
    graphs = LladaGraphs(loaded.model, rows=config.batch, length=config.prompt_length + config.gen_length, cache=cache)
    assert loaded.mask_token_id is not None

    def run(measure: Callable, with_graphs: LladaGraphs | None) -> torch.Tensor:
        with torch.inference_mode():
            sampler = llada_steps(
                loaded.model, ids, gen_length=config.gen_length, block_length=config.block_length,
                steps=config.steps, mask_id=loaded.mask_token_id, cache=cache, graphs=with_graphs,
            )  # fmt: skip
            while not sampler.done:
                sampler.prepare_step()  # the per-block host sync, outside the timed step as in the scenario
                measure(lambda: next(sampler))
            return sampler.generation.cpu()

    return side_by_side(
        f"LLaDA step ({'vanilla' if cache == 'none' else cache + ' cache'})", lambda m: run(m, None),
        lambda m: run(m, graphs), lambda: graphs.preparation.seconds, loaded.device, config.rounds,
    )  # fmt: skip


def report(config: ForwardBench, device: torch.device, results: list[ForwardComparison]) -> str:
    capture = "CUDA graph replay" if device.type == "cuda" else "inductor (a CPU has no CUDA graphs)"
    lines = [
        f"time per forward ({'CUDA events: device time' if device.type == 'cuda' else 'wall time'}), eager vs "
        f"compiled: the miniature pair on {device.type} "
        f"({torch.get_num_threads()} threads), compiled = {capture}",
        f"batch {config.batch}, prompt {config.prompt_length}, {config.gen_length} new tokens; LLaDA "
        f"{config.steps} steps, block {config.block_length}; {config.rounds} interleaved rounds",
        "",
        f"{'forward':<40} {'eager_ms':>9} {'compiled_ms':>11} {'ratio':>6} {'prepare_s':>9} {'tokens':>6}",
    ]
    for r in results:
        lines.append(
            f"{r.name:<40} {1e3 * statistics.median(r.baseline):9.3f} {1e3 * statistics.median(r.ours):11.3f} "
            f"{r.ratio:6.3f} {r.preparation_s:9.1f} {'equal' if r.tokens_equal else 'DIFFER':>6}"
        )
    lines.append("")
    lines.append("ratio = median over rounds of compiled / eager per-forward time, the two timed back to back")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the three comparisons and print the table; exit 1 if any contender's tokens differ."""
    parser = argparse.ArgumentParser(prog="python -m workers.measure.bench_forward", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ForwardBench.rounds, help="measured rounds per comparison")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all usable cores)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or len(os.sched_getaffinity(0)))
    config = ForwardBench(rounds=args.rounds)
    device = torch.device(args.device)
    llama, llada = load_miniature("llama", device), load_miniature("llada", device)
    results = [
        compare_llama(llama, config),
        compare_llada(llada, config, "none"),
        compare_llada(llada, config, "dual"),
    ]
    print(report(config, device, results))
    return 0 if all(r.tokens_equal for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
