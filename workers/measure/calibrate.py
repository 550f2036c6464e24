"""`llada-bench calibrate`: measure the running machine's own roofs in a few seconds (matmul peak in a dtype,
elementwise rate, memory bandwidth, per-operator dispatch floor), so the roofline predicts a device's runs
against the device that ran them. Workers measure once per process, device and dtype and record it in each
run's environment.

Each roof is measured where it is reached. The elementwise multiply is recorded, but on a GPU it is not the
vector roof: it streams 256 MiB operands (a small one is a single launch-bound kernel: 65,536 elements measured
8.1e9 op/s on an H200), so its rate is the bandwidth over 3 x element bytes, and the roofline, which charges an
operator's bytes through the bandwidth, would charge them twice. The report takes the CUDA cores' datasheet rate
as a GPU's vector roof (roofline/measured.py `vector_roof`, where the choice is argued). On CPU the operand stays
cache-resident, as the tiny models' tensors are: what it times is arithmetic and cache traffic, no DRAM. The copy
moves 1 GiB (GPU) or 128 MiB (CPU, far past the caches).

The dispatch floor is what one operator of an eager transformers decoder costs when its work is nothing: a
forward pass of a micro LlamaForCausalLM (every tensor a few elements) divided by the kernel launches the
roofline counts for it (roofline/forward.py: 16 per layer, 2 per pass). That includes Python, module calls,
the ATen dispatcher and the kernel launch, which is what bounds a small model and batch-1 eager decode. The
bare floor of one ATen op (a one-element add) is recorded beside it.

The host floor (`host_floor_s`) is measured on the model that runs: the host time of one eager forward of a
one-token input with its real layer count, on the run's device (`perf_counter` around the call, the device's
queue drained before and not waited on after: `host_seconds`), which bounds every eager forward of that model
from below.
The roofline charges each eager forward at least this (`HardwareProfile.host_floor_s`); it supersedes the
launch-count model, which scales a 2-layer micro model's launches and missed the 8B forward's host time by 1.5x.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import weakref
from collections.abc import Callable

import torch

from specs.results import MeasuredRoofs

# Sizes: big enough to leave the dispatch floor far behind, small enough for a few seconds on 2 CPU cores.
CPU_MATMUL_N, GPU_MATMUL_N = 768, 8192
CPU_COPY_BYTES, GPU_COPY_BYTES = 128 << 20, 1 << 30
CPU_VECTOR_ELEMENTS = 1 << 16  # a cache-resident operand, as the tiny models' tensors are
GPU_VECTOR_BYTES = 256 << 20  # per operand: what an elementwise op streams at (recorded; not the GPU's vector roof)
HOST_FLOOR_CALLS = 3
DISPATCH_CALLS = 2000
REPEATS = 5  # best of: the roof is what the machine can do, not its average under interruptions

# Kernel launches the roofline counts per decoder layer and per pass (roofline/forward.py): q, k, v, o; gate,
# up, down; RoPE on q and k; two norms; two residual adds; SiLU; gate x up; one fused attention kernel. Then
# the final norm and the LM head.
LAUNCHES_PER_LAYER, LAUNCHES_PER_PASS = 16, 2
MICRO_LAYERS = 2
MODEL_CALLS = 10

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_cache: dict[tuple[str, str, int], MeasuredRoofs] = {}
# model -> (seconds per eager forward, its layers); weak keys, so a model loaded later at a freed model's address
# is measured afresh rather than inheriting its floor
_host_floors: weakref.WeakKeyDictionary[torch.nn.Module, tuple[float, int]] = weakref.WeakKeyDictionary()


def measured_roofs(device: torch.device | str, dtype: torch.dtype | str) -> MeasuredRoofs:
    """The roofs of `device` in `dtype`, measured on first use in this process and kept (a worker measures
    once, not once per run)."""
    device = torch.device(device)
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    key = (str(device), name, torch.get_num_threads())
    if key not in _cache:
        _cache[key] = calibrate(device, name)
    return _cache[key]


def calibrate(device: torch.device | str, dtype: str = "float32") -> MeasuredRoofs:
    """Measure matmul FLOP/s (dtype), elementwise op/s, copy bandwidth and the dispatch floor of one op."""
    device = torch.device(device)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: allowed {', '.join(DTYPES)}")
    torch_dtype = DTYPES[dtype]
    gpu = device.type == "cuda"
    started = time.perf_counter()
    timer = _cuda_timer(device) if gpu else _cpu_timer
    n = GPU_MATMUL_N if gpu else CPU_MATMUL_N
    with torch.inference_mode():
        a = torch.randn(n, n, device=device).to(torch_dtype)  # [n, n]
        b = torch.randn(n, n, device=device).to(torch_dtype)  # [n, n]
        c = torch.empty(n, n, device=device, dtype=torch_dtype)
        matmul_s = _best(lambda: torch.mm(a, b, out=c), timer, calls=3)
        del a, b, c
        elements = GPU_VECTOR_BYTES // torch_dtype.itemsize if gpu else CPU_VECTOR_ELEMENTS
        x = torch.rand(elements, device=device, dtype=torch_dtype)
        y, z = torch.rand_like(x), torch.empty_like(x)
        vector_s = _best(lambda: torch.mul(x, y, out=z), timer, calls=5 if gpu else 50)
        del x, y, z
        size = GPU_COPY_BYTES if gpu else CPU_COPY_BYTES
        src = torch.empty(size // 4, device=device, dtype=torch.float32).fill_(1.0)
        dst = torch.empty_like(src)
        copy_s = _best(lambda: dst.copy_(src), timer, calls=2)
        del src, dst
        one = torch.ones(1, device=device, dtype=torch_dtype)
        out = torch.empty_like(one)
        op_dispatch_s = _best(lambda: torch.add(one, one, out=out), timer, calls=DISPATCH_CALLS)
        dispatch_s = _model_dispatch_s(device, torch_dtype, timer)
    threads = torch.get_num_threads() if not gpu else None
    return MeasuredRoofs(
        device=_device_name(device),
        dtype=dtype,
        threads=threads,
        matmul_flops_per_s=2 * n**3 / matmul_s,
        vector_ops_per_s=elements / vector_s,
        vector_bytes=3 * elements * torch_dtype.itemsize,
        memory_bandwidth_bytes_per_s=2 * size / copy_s,
        dispatch_s=dispatch_s,
        op_dispatch_s=op_dispatch_s,
        memory_bytes=_memory_bytes(device),
        method=(
            f"best of {REPEATS}: {n}x{n} {dtype} matmul; elementwise mul of {elements} {dtype} elements; "
            f"copy of {size >> 20} MiB (read + write counted); dispatch: a {MICRO_LAYERS}-layer micro "
            f"LlamaForCausalLM forward over {MICRO_LAYERS * LAUNCHES_PER_LAYER + LAUNCHES_PER_PASS} launches, "
            f"{MODEL_CALLS} calls; bare op: one-element add, {DISPATCH_CALLS} calls"
            + (f"; {threads} threads" if threads else "")
        ),
        wall_s=time.perf_counter() - started,
    )


def _model_dispatch_s(device: torch.device, dtype: torch.dtype, timer: Callable[[Callable[[], object], int], float]) -> float:
    """Seconds per roofline launch of an eager transformers decoder whose work is nothing: a one-token forward
    (no cache) of a micro LlamaForCausalLM, divided by the launches the roofline counts for it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=8, hidden_size=8, intermediate_size=16, num_hidden_layers=MICRO_LAYERS, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=16, bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
    ids = torch.zeros((1, 1), dtype=torch.long, device=device)  # [B=1, S=1]
    per_forward = _best(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1), timer, calls=MODEL_CALLS)
    return per_forward / (MICRO_LAYERS * LAUNCHES_PER_LAYER + LAUNCHES_PER_PASS)


def with_host_floor(roofs: MeasuredRoofs, model: torch.nn.Module, device: torch.device | str) -> MeasuredRoofs:
    """`roofs` with the host floor of `model` (measured once per model object in this process)."""
    if model not in _host_floors:
        _host_floors[model] = (host_floor_s(model, torch.device(device)), _num_layers(model))
    floor_s, layers = _host_floors[model]
    return roofs.model_copy(update={"host_floor_s": floor_s, "host_floor_layers": layers})


def host_floor_s(model: torch.nn.Module, device: torch.device) -> float:
    """Host seconds of one eager forward of `model` on a one-token input (no cache), with its real layer count and
    on its device: what bounds every eager forward of this model from below. The best of REPEATS x
    HOST_FLOOR_CALLS timings (`host_seconds`): host time, measured the same way for every model."""
    ids = torch.zeros((1, 1), dtype=torch.long, device=device)  # [B=1, S=1]

    def drain() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    with torch.inference_mode():
        return host_seconds(lambda: model(input_ids=ids, use_cache=False), drain, calls=REPEATS * HOST_FLOOR_CALLS)


def host_seconds(call: Callable[[], object], drain: Callable[[], None], *, calls: int) -> float:
    """The best host time of `call` over `calls` single calls (after one warm-up): `perf_counter` around the call
    only, the device's queue drained before it and never inside the interval.

    CUDA events around a forward measure max(host, device): the weight read (~4 ms for 8B on an H200) hides under
    the host's ~24 ms, but it is device time all the same. And a forward that syncs the host (transformers'
    mask code in LLaMA's uncached forward does; LLaDA's does not) would wait there for whatever was queued
    before it, so the two models' floors were measured differently. Drained first, the queue holds nothing from
    earlier calls, a sync inside the forward waits only on that forward's own first kernels, and the interval
    closes when the host has dispatched the last kernel, whatever the device still has to run. On a CPU `drain`
    does nothing and host time is the forward's time."""
    call()
    drain()
    best = float("inf")
    for _ in range(calls):
        drain()
        start = time.perf_counter_ns()
        call()
        best = min(best, (time.perf_counter_ns() - start) / 1e9)
    drain()
    return best


def _num_layers(model: torch.nn.Module) -> int:
    config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    return int(config.num_hidden_layers)


def _best(op: Callable[[], object], timer: Callable[[Callable[[], object], int], float], *, calls: int) -> float:
    """Seconds per call: the best of REPEATS timings of `calls` back-to-back calls (after one warm-up)."""
    timer(op, 1)
    return min(timer(op, calls) for _ in range(REPEATS)) / calls


def _cpu_timer(op: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        op()
    return (time.perf_counter_ns() - start) / 1e9


def _cuda_timer(device: torch.device) -> Callable[[Callable[[], object], int], float]:
    def timer(op: Callable[[], object], calls: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(calls):
            op()
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / 1e3

    return timer


def _device_name(device: torch.device) -> str:
    """The name Environment.device records, so the report matches a calibration to its runs."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def format_roofs(roofs: MeasuredRoofs) -> str:
    """The measurement as the lines a person reads."""
    return "\n".join([
        f"device: {roofs.device} ({roofs.dtype}" + (f", {roofs.threads} threads)" if roofs.threads else ")"),
        f"matmul peak:       {roofs.matmul_flops_per_s / 1e9:,.1f} GFLOP/s",
        f"elementwise rate:  {roofs.vector_ops_per_s / 1e9:,.2f} Gop/s",
        f"memory bandwidth:  {roofs.memory_bandwidth_bytes_per_s / 1e9:,.1f} GB/s",
        f"dispatch floor:    {roofs.dispatch_s * 1e6:,.2f} µs per operator of an eager decoder "
        f"({roofs.op_dispatch_s * 1e6:,.2f} µs for a bare op)" if roofs.op_dispatch_s is not None else
        f"dispatch floor:    {roofs.dispatch_s * 1e6:,.2f} µs per operator",
    ] + ([
        f"host floor:        {roofs.host_floor_s * 1e3:,.2f} ms per eager forward of a "
        f"{roofs.host_floor_layers}-layer model",
    ] if roofs.host_floor_s is not None else []) + [
        f"ridge point:       {roofs.matmul_flops_per_s / roofs.memory_bandwidth_bytes_per_s:,.1f} FLOP/byte",
        f"method: {roofs.method}; {roofs.wall_s:.1f} s",
    ])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llada-bench calibrate",
        description="Measure this machine's roofs (matmul peak in a dtype, memory bandwidth, per-op dispatch "
        "floor) in a few seconds. Sweeps record the same measurement in every run's environment.",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES), help="matmul dtype (default float32)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("llada-bench calibrate: error: --device cuda but no CUDA device is visible; use --device cpu",
              file=sys.stderr)
        return 2
    roofs = calibrate(device, args.dtype)
    print(json.dumps(roofs.model_dump(), indent=1) if args.json else format_roofs(roofs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
