"""Where a compiled LLaMA decode step's time goes on this GPU: its share of the roofline's memory roof, and a
torch.profiler breakdown per attention kernel.

usage: python tests/gpu/profile_decode.py [--batch 1 64] [--prompt 512] [--new 256] [--steps 16] [--preset 8b]
(`just profile-decode`). For each `decode_attention` (static: transformers' kernel over every position of the
StaticCache; live: the live prefix in 256-position buckets, KV heads shared) and each batch, it builds the
compiled decode step (synthetic weights, bf16, sdpa), runs one whole generation to compile and record its
graphs, then, in a second generation, times `--steps` decode steps with CUDA events (no profiler attached) and
profiles `--steps` further ones.

The roof is the roofline's: the bytes it charges each timed step (`roofline.llama.decode_pass_bytes`: every
weight once, the LM head included and the embedding table not, the live keys and values once, activations)
over the bandwidth the workers measure (`workers.measure.calibrate`), so "% of roof" here is the figure the
report gives a run. What the kernel reads beyond those bytes is printed beside it, not folded into the roof:
the live kernel attends its whole bucket, the static one the whole cache. Each line is also a finding
(`tests/gpu/findings.py`: JSON, appended to $LLADA_GPU_FINDINGS), which the GPU round reads.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from roofline.llama import decode_pass_bytes
from specs.schema import Controls, ModelSpec
from specs.shapes import ModelShape
from tests.gpu.findings import CUDA, record_finding
from workers.measure.calibrate import measured_roofs
from workers.models.loading import LoadedModel, load_model, shape_of_config
from workers.samplers import ar_steps
from workers.samplers.compiled import CompiledDecode
from workers.samplers.live_cache import LIVE_BUCKET, bucketed

SKIPPED_STEPS = 4  # decode steps of the second generation before the timed ones


def roof_bytes(shape: ModelShape, *, batch: int, kv_lens: list[int], element_bytes: int) -> float:
    """The mean bytes the roofline charges the decode passes that attend `kv_lens` positions."""
    return statistics.fmean(decode_pass_bytes(shape, batch=batch, kv_len=n, element_bytes=element_bytes) for n in kv_lens)


def kernel_extra_kv_bytes(
    shape: ModelShape, *, attention: str, batch: int, kv_lens: list[int], capacity: int, element_bytes: int
) -> float:
    """Mean keys and values the kernel reads past the live ones: to the end of the bucket (live) or of the static
    cache (static)."""
    per_position = 2 * shape.num_layers * batch * shape.num_kv_heads * shape.head_dim * element_bytes
    read = [bucketed(n, bucket=LIVE_BUCKET, capacity=capacity) if attention == "live" else capacity for n in kv_lens]
    return statistics.fmean(per_position * (r - n) for r, n in zip(read, kv_lens, strict=True))


def profile_kernel(loaded: LoadedModel, shape: ModelShape, attention: str, batch: int, args: argparse.Namespace,
                   bandwidth: float) -> None:  # fmt: skip
    model = loaded.model
    capacity = args.prompt + args.new
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(1000, 20000, (batch, args.prompt), generator=generator).to(CUDA)
    step = CompiledDecode(model, batch=batch, capacity=capacity, decode_attention=attention)

    def timed(decoder: object, steps: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(CUDA)
        start.record()
        for _ in range(steps):
            next(decoder)  # type: ignore[call-overload]
        end.record()
        torch.cuda.synchronize(CUDA)
        return start.elapsed_time(end) / 1e3 / steps

    with torch.inference_mode():
        for _ in ar_steps(model, prompt, n_new=args.new, compiled=step):  # compiles and records every graph
            pass
        decoder = ar_steps(model, prompt, n_new=args.new, compiled=step)
        next(decoder)  # the prefill
        for _ in range(SKIPPED_STEPS):
            next(decoder)
        step_s = timed(decoder, args.steps)  # no profiler attached
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            timed(decoder, args.steps)
    # Decode step j (1-based) attends P + j positions: the timed ones are j = SKIPPED_STEPS + 1 ... + steps.
    kv_lens = [args.prompt + SKIPPED_STEPS + j for j in range(1, args.steps + 1)]
    element = next(model.parameters()).element_size()
    roof = roof_bytes(shape, batch=batch, kv_lens=kv_lens, element_bytes=element)
    extra = kernel_extra_kv_bytes(shape, attention=attention, batch=batch, kv_lens=kv_lens, capacity=capacity,
                                  element_bytes=element)  # fmt: skip
    roof_s = roof / bandwidth
    print(f"\n=== decode_attention={attention}, batch {batch}: {step.kernel}")
    print(f"preparation {step.preparation_s or 0.0:.1f} s, {step.graphs} graph(s); live {kv_lens[0]}-{kv_lens[-1]} positions")
    print(f"mean decode step {1e3 * step_s:.2f} ms (CUDA events, no profiler); the roofline's memory roof "
          f"{1e3 * roof_s:.2f} ms ({roof / 1e9:.2f} GB at {bandwidth / 1e12:.2f} TB/s measured): {roof_s / step_s:.0%} "
          f"of the roof; the kernel also reads {extra / 1e9:.3f} GB of keys and values past the live ones "
          f"({(roof + extra) / bandwidth / step_s:.0%} of the step at the bandwidth with them)")  # fmt: skip
    record_finding("decode_profile", attention=attention, batch=batch, prompt=args.prompt, new=args.new,
                   kernel=step.kernel, step_ms=1e3 * step_s, roof_ms=1e3 * roof_s, roof_bytes=roof,
                   fraction_of_roof=roof_s / step_s, kernel_extra_kv_bytes=extra,
                   bandwidth_bytes_per_s=bandwidth)  # fmt: skip
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[64], help="batch sizes, one profile each")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--steps", type=int, default=16, help="decode steps timed, and as many profiled")
    parser.add_argument("--preset", default="8b", help="synthetic shape: 8b or small")
    parser.add_argument("--rows", type=int, default=15, help="kernels listed per attention")
    parser.add_argument("--attention", nargs="+", default=["static", "live"], choices=["static", "live"])
    args = parser.parse_args(argv)
    if args.new < SKIPPED_STEPS + 2 * args.steps + 1:
        parser.error(f"--new {args.new}: the second generation needs {SKIPPED_STEPS} + 2 x --steps decode steps")
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    spec = ModelSpec(name=f"llama-{args.preset}", arch="llama", source={"synthetic": args.preset})
    loaded = load_model(spec, Controls(dtype="bfloat16", attention="sdpa", device="cuda"), CUDA)
    shape = shape_of_config(loaded.model.config)  # what the roofline costs, as the worker records it
    bandwidth = measured_roofs(CUDA, "bfloat16").memory_bandwidth_bytes_per_s  # what the runs are costed on
    print(f"{torch.cuda.get_device_name(CUDA)}, torch {torch.__version__}")
    for batch in args.batch:
        for attention in args.attention:
            profile_kernel(loaded, shape, attention, batch, args, bandwidth)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
