"""`llada-bench env`: print the environment record a worker captures, and check what the machine offers.

The record is exactly what every artifact embeds (workers.environment.capture_environment). The checks
answer "can this machine (or this image) measure what the study measures": a CUDA device, BF16 on it,
and flash-attn. `--require-image` checks what the image claims in LLADA_BENCH_IMAGE_CLAIMS, so the
image's %test fails on a node where the GPU, BF16 or flash-attn is missing.

`--no-device` checks only what needs no GPU: torch built with CUDA, flash-attn importable. It creates no
CUDA context and runs no kernel, so the Docker HEALTHCHECK (every 10 minutes, mid-sweep) neither
occupies the GPU a sweep holds with `exclusive: true` nor perturbs its timings. BF16 needs the device and
is left to `%test` and `llada-bench env` run before a sweep.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

from workers.environment import capture_environment

CLAIMS_ENV = "LLADA_BENCH_IMAGE_CLAIMS"  # set by the image: a comma-separated list of capabilities
EXIT_OK, EXIT_MISSING, EXIT_USAGE = 0, 1, 2
BF16_MIN_CAPABILITY = (8, 0)  # Ampere: native BF16 tensor cores (and flash-attn 2's minimum)


@dataclass(frozen=True)
class Check:
    """One capability: present or not, and a line saying why."""

    name: str
    ok: bool
    detail: str


def check_cuda() -> Check:
    """A CUDA device torch can use."""
    if torch.version.cuda is None:
        return Check(
            "cuda", False, f"torch {torch.__version__} is a CPU-only build (no CUDA support compiled in)"
        )
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return Check(
            "cuda",
            False,
            f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: no driver, "
            "CUDA_VISIBLE_DEVICES empty, or the container was started without --nv (Apptainer) "
            "/ --gpus all (Docker)",
        )
    names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
    return Check(
        "cuda", True, f"{torch.cuda.device_count()} device(s): {', '.join(names)}; CUDA {torch.version.cuda}"
    )


def check_bf16() -> Check:
    """Native BF16 on the first GPU (compute capability >= 8.0; emulation does not count)."""
    if not torch.cuda.is_available():
        return Check("bf16", False, "no CUDA device, so no GPU BF16 (the study's dtype)")
    capability = torch.cuda.get_device_capability(0)
    name = torch.cuda.get_device_name(0)
    if tuple(capability) < BF16_MIN_CAPABILITY:
        return Check(
            "bf16",
            False,
            f"{name} has compute capability {capability[0]}.{capability[1]}; native BF16 needs "
            f"{BF16_MIN_CAPABILITY[0]}.{BF16_MIN_CAPABILITY[1]} or newer (A100, H100, ...)",
        )
    return Check("bf16", True, f"{name}, compute capability {capability[0]}.{capability[1]}")


def check_flash_attn() -> Check:
    """flash-attn is installed and imports; with a GPU, its kernel also runs once on a tiny input."""
    try:
        version = importlib.metadata.version("flash-attn")
    except importlib.metadata.PackageNotFoundError:
        return Check(
            "flash_attn",
            False,
            "the flash-attn package is not installed (the image ships it; elsewhere: "
            "pip install 'llada-bench[gpu]' on a CUDA machine)",
        )
    try:
        from flash_attn import flash_attn_func
    except Exception as exc:  # ImportError, OSError from a missing CUDA library, undefined symbols (ABI)
        return Check("flash_attn", False, f"flash-attn {version} is installed but does not import: {exc}")
    if not torch.cuda.is_available():
        return Check("flash_attn", True, f"flash-attn {version} imports (no GPU visible to run its kernel)")
    try:
        dtype = (
            torch.bfloat16
            if tuple(torch.cuda.get_device_capability(0)) >= BF16_MIN_CAPABILITY
            else torch.float16
        )
        q = torch.randn(1, 16, 2, 64, device="cuda", dtype=dtype)  # [batch, seq, heads, head_dim]
        out = flash_attn_func(q, q, q, causal=False)
        torch.cuda.synchronize()
        if not torch.isfinite(out).all():
            return Check("flash_attn", False, f"flash-attn {version}: its kernel returned non-finite values")
    except Exception as exc:  # e.g. "no kernel image is available" on an unsupported GPU
        return Check(
            "flash_attn", False, f"flash-attn {version} imports but its kernel fails on this GPU: {exc}"
        )
    return Check(
        "flash_attn", True, f"flash-attn {version}; kernel ran on {torch.cuda.get_device_name(0)} in {dtype}"
    )


CHECKS: dict[str, Callable[[], Check]] = {
    "cuda": check_cuda,
    "bf16": check_bf16,
    "flash_attn": check_flash_attn,
}


def check_cuda_build() -> Check:
    """torch was built with CUDA (nothing asks the driver: no context, no kernel)."""
    if torch.version.cuda is None:
        return Check("cuda", False, f"torch {torch.__version__} is a CPU-only build (no CUDA support compiled in)")
    return Check("cuda", True, f"torch {torch.__version__} built with CUDA {torch.version.cuda} (device not touched)")


def check_flash_attn_import() -> Check:
    """flash-attn is installed and its extension imports (its kernel is not run)."""
    try:
        version = importlib.metadata.version("flash-attn")
    except importlib.metadata.PackageNotFoundError:
        return Check("flash_attn", False, "the flash-attn package is not installed")
    try:
        from flash_attn import flash_attn_func  # noqa: F401
    except Exception as exc:  # ImportError, OSError from a missing CUDA library, undefined symbols (ABI)
        return Check("flash_attn", False, f"flash-attn {version} is installed but does not import: {exc}")
    return Check("flash_attn", True, f"flash-attn {version} imports (kernel not run)")


# What --no-device checks: the capabilities that can be established without touching a GPU.
DEVICELESS_CHECKS: dict[str, Callable[[], Check]] = {"cuda": check_cuda_build, "flash_attn": check_flash_attn_import}


class UsageError(ValueError):
    """A requirement the command cannot interpret (unknown capability, no image claims)."""


def parse_capabilities(text: str, source: str) -> list[str]:
    """'cuda, bf16,flash_attn' → ['cuda', 'bf16', 'flash_attn']; unknown names are a usage error."""
    names = [part.strip().replace("-", "_") for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise UsageError(
            f"{source}: unknown capability {', '.join(map(repr, unknown))}; allowed: {', '.join(CHECKS)}"
        )
    return names


def required_capabilities(args: argparse.Namespace) -> list[str]:
    """The union of --require, the --require-<cap> flags and (with --require-image) the image's claims."""
    wanted: list[str] = []
    for value in args.require:
        wanted += parse_capabilities(value, "--require")
    for name in CHECKS:
        if getattr(args, f"require_{name}"):
            wanted.append(name)
    if args.require_image:
        claims = os.environ.get(CLAIMS_ENV)
        if claims is None:
            raise UsageError(
                f"--require-image: {CLAIMS_ENV} is not set, so this is not the llada-bench image; "
                f"name the capabilities instead, e.g. --require cuda,bf16,flash_attn"
            )
        wanted += parse_capabilities(claims, CLAIMS_ENV)
    return list(dict.fromkeys(wanted))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llada-bench env",
        description="Print the environment record a worker captures; with --require*, fail (exit 1) when a "
        "capability is missing.",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the record as JSON (exactly as artifacts hold it)"
    )
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="CAPS",
        help=f"comma-separated capabilities that must be present: {', '.join(CHECKS)}",
    )
    parser.add_argument("--require-cuda", action="store_true", help="a CUDA device must be visible")
    parser.add_argument("--require-bf16", action="store_true", help="the GPU must support BF16 natively")
    parser.add_argument(
        "--require-flash-attn", action="store_true", help="flash-attn must import (and run on the GPU)"
    )
    parser.add_argument(
        "--require-image",
        action="store_true",
        help=f"require what the image claims in ${CLAIMS_ENV} (the image's %%test and HEALTHCHECK)",
    )
    parser.add_argument(
        "--no-device",
        action="store_true",
        help="touch no GPU (no CUDA context, no kernel): check the build and imports only (the HEALTHCHECK)",
    )
    return parser


def deviceless_main(wanted: list[str]) -> int:
    """The checks a running sweep can afford beside it: none of them creates a CUDA context."""
    skipped = [name for name in wanted if name not in DEVICELESS_CHECKS]
    checks = [DEVICELESS_CHECKS[name]() for name in (wanted or DEVICELESS_CHECKS) if name in DEVICELESS_CHECKS]
    print("capabilities (--no-device: the GPU is not touched)")
    _print_checks(checks)
    for name in skipped:
        print(f"  {name.ljust(10)}  --   not checked: needs the device (run llada-bench env before a sweep)")
    return _exit_status(checks, wanted)


def _print_checks(checks: list[Check]) -> None:
    for check in checks:
        print(f"  {check.name.ljust(10)}  {'yes' if check.ok else 'no '}  {check.detail}")


def _exit_status(checks: list[Check], wanted: list[str]) -> int:
    """Name each required capability that is missing (on stderr); EXIT_MISSING if any is."""
    missing = [c for c in checks if not c.ok and c.name in wanted]
    for check in missing:
        print(f"missing: {check.name}: {check.detail}", file=sys.stderr)
    return EXIT_MISSING if missing else EXIT_OK


def format_record(record: dict[str, object]) -> str:
    """`key: value` lines, nested NVML readings flattened, missing values shown as '-'."""
    width = max(len(k) for k in record)
    lines = []
    for key, value in record.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
        lines.append(f"{key.ljust(width)}  {'-' if value is None else value}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        wanted = required_capabilities(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.no_device:
        return deviceless_main(wanted)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    record = capture_environment(device)
    if args.json:
        print(record.model_dump_json(indent=2))
    else:
        print(format_record(json.loads(record.model_dump_json())))
    # The human view reports every capability; JSON stays the bare record, checking only what is required.
    checks = [CHECKS[name]() for name in (wanted if args.json else wanted or CHECKS)]
    if not args.json:
        print("\ncapabilities")
        _print_checks(checks)
    return _exit_status(checks, wanted)


if __name__ == "__main__":
    raise SystemExit(main())
