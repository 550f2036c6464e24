"""Times roofline evaluations (`just bench`): the planner may call `predict` once per run, so it must be cheap."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from roofline.hardware import get_hardware
from roofline.predict import predict
from roofline.workload import Workload

_HW = get_hardware("a100-sxm4-80gb")

# LLaDA's case: 128 + 512 tokens, 256 steps over blocks of 32.
_LLADA_RUN = Workload(prompt_len=128, gen_len=512, steps=256, block_length=32)

CASES: dict[str, Callable[[], object]] = {
    "llama 128+512 faithful": lambda: predict("llama", None, Workload(prompt_len=128, gen_len=512), hardware=_HW),
    "llama 2048+2048 b8 faithful": lambda: predict(
        "llama", None, Workload(prompt_len=2048, gen_len=2048, batch=8), hardware=_HW
    ),
    "llada 128+512 s256 k32 faithful": lambda: predict("llada", None, _LLADA_RUN, hardware=_HW),
    "llada 128+512 s256 k32 study": lambda: predict("llada", None, _LLADA_RUN, hardware=_HW, fidelity="study"),
    "dream 128+512 s256 faithful": lambda: predict(
        "dream", None, Workload(prompt_len=128, gen_len=512, steps=256), hardware=_HW
    ),
}


def time_per_call_us(fn: Callable[[], object], repeats: int) -> float:
    """Best of five rounds of `repeats` calls, in microseconds per call."""
    fn()  # warm-up (imports, caches)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(repeats):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / repeats / 1e3)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m roofline.bench", description=__doc__)
    parser.add_argument("-n", "--repeats", type=int, default=200, help="evaluations per timing round")
    args = parser.parse_args(argv)
    for name, fn in CASES.items():
        print(f"{name:34s} {time_per_call_us(fn, args.repeats):9.1f} us/evaluation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
