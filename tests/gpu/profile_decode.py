"""Where a compiled LLaMA decode step's time goes on this GPU: a torch.profiler breakdown per attention kernel.

usage: python tests/gpu/profile_decode.py [--batch 64] [--prompt 512] [--new 256] [--steps 16] [--preset 8b]
(`just profile-decode`). For each `decode_attention` (static: transformers' kernel over every position of the
StaticCache; live: the live prefix in 256-position buckets, KV heads shared), it builds the compiled decode
step (synthetic weights, bf16, sdpa), runs one whole generation to compile and record its graphs, then times
`--steps` decode steps of a second generation with CUDA events and profiles them. It prints the mean step,
the memory roof of a decode step (weights once, plus the live keys and values once), the fraction of that roof
reached, and the kernels that took the device's time, so a step that costs more than its bytes shows which
kernel pays for it (the static kernel's repeat_kv copies appear as elementwise copy kernels).
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from specs.schema import Controls, ModelSpec
from workers.models.loading import load_model
from workers.samplers import ar_steps
from workers.samplers.compiled import CompiledDecode

CUDA = torch.device("cuda", 0)


def memory_roof_s(model: torch.nn.Module, *, batch: int, live: int, bandwidth_bytes_per_s: float) -> float:
    """Bytes a decode step must read (every weight once, the live keys and values once) over the bandwidth."""
    config = model.config
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    head_dim = config.hidden_size // config.num_attention_heads
    element = next(model.parameters()).element_size()
    kv = 2 * config.num_hidden_layers * batch * config.num_key_value_heads * live * head_dim * element
    return (weights + kv) / bandwidth_bytes_per_s


def measured_bandwidth_bytes_per_s() -> float:
    """A 1 GiB device copy (read + write counted), best of 5: the roof the step is compared with."""
    source = torch.empty(2**30, dtype=torch.uint8, device=CUDA)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source)
        end.record()
        torch.cuda.synchronize(CUDA)
        best = min(best, start.elapsed_time(end) / 1e3)
    return 2 * source.numel() / best


def profile_kernel(loaded, attention: str, args: argparse.Namespace, bandwidth: float) -> None:  # noqa: ANN001
    model = loaded.model
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(1000, 20000, (args.batch, args.prompt), generator=generator).to(CUDA)
    step = CompiledDecode(model, batch=args.batch, capacity=args.prompt + args.new, decode_attention=attention)
    with torch.inference_mode():
        for _ in ar_steps(model, prompt, n_new=args.new, compiled=step):  # compiles and records every graph
            pass
        decoder = ar_steps(model, prompt, n_new=args.new, compiled=step)
        next(decoder)  # the prefill
        for _ in range(4):
            next(decoder)
        torch.cuda.synchronize(CUDA)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            start.record()
            for _ in range(args.steps):
                next(decoder)
            end.record()
            torch.cuda.synchronize(CUDA)
    step_s = start.elapsed_time(end) / 1e3 / args.steps
    live = args.prompt + 5 + args.steps // 2  # the mean live length of the profiled steps
    roof_s = memory_roof_s(model, batch=args.batch, live=live, bandwidth_bytes_per_s=bandwidth)
    print(f"\n=== decode_attention={attention}: {step.kernel}")
    print(f"compile {step.compile_s or 0.0:.1f} s, {step.graphs} graph(s); batch {args.batch}, live ~{live} positions")
    print(f"mean decode step {1e3 * step_s:.2f} ms; memory roof {1e3 * roof_s:.2f} ms "
          f"({bandwidth / 1e12:.2f} TB/s measured): {roof_s / step_s:.0%} of the roof")  # fmt: skip
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--steps", type=int, default=16, help="decode steps profiled")
    parser.add_argument("--preset", default="8b", help="synthetic shape: 8b or small")
    parser.add_argument("--rows", type=int, default=15, help="kernels listed per attention")
    parser.add_argument("--attention", nargs="+", default=["static", "live"], choices=["static", "live"])
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    spec = ModelSpec(name=f"llama-{args.preset}", arch="llama", source={"synthetic": args.preset})
    loaded = load_model(spec, Controls(dtype="bfloat16", attention="sdpa", device="cuda"), CUDA)
    bandwidth = measured_bandwidth_bytes_per_s()
    print(f"{torch.cuda.get_device_name(CUDA)}, torch {torch.__version__}")
    for attention in args.attention:
        profile_kernel(loaded, attention, args, bandwidth)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
