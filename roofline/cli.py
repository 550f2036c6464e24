"""`llada-bench roofline ...`: print the study's analyses (text or JSON) for a generation of any registry family."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace

from roofline.block_diffusion import estimate_block_diffusion
from roofline.dream import DREAM_ALGS, estimate_dream
from roofline.errors import RooflineInputError
from roofline.fidelity import FIDELITIES
from roofline.hardware import HARDWARE, HardwareProfile, get_hardware
from roofline.llada import estimate_llada
from roofline.llama import estimate_llama
from roofline.memory import block_diffusion_memory, dream_memory, llada_memory, llama_memory
from roofline.render import (
    block_diffusion_json,
    block_diffusion_text,
    dream_json,
    dream_text,
    llada_json,
    llada_text,
    llama_json,
    llama_text,
)
from roofline.workload import Workload
from specs.block_diffusion import OFFICIAL_BLOCK_LENGTH, OFFICIAL_SUB_BLOCK_LENGTH
from specs.options import nonnegative_number
from specs.registry import FAMILIES, Family, family, preset_shape

# The study's hardware goes with the study's model; the faithful model defaults to the project's A100.
DEFAULT_HARDWARE = {"study": "study-a6000", "faithful": "a100-sxm4-80gb"}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (the caller prints it), not usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


def _common(sub: argparse.ArgumentParser, fam: Family) -> None:
    sub.add_argument(
        "--prompt-len", type=int, required=True, help="prompt tokens (the study's --input_prompt_length)"
    )
    sub.add_argument(
        "--gen-len", type=int, required=True, help="generated tokens (the study's --sequence_length)"
    )
    sub.add_argument("--batch", type=int, default=1, help="sequences per batch (faithful only; default 1)")
    sub.add_argument(
        "--preset", default=fam.full_size,
        help=f"model shape preset of the registry: {', '.join(fam.presets)} "
        f"(default: {fam.full_size}, the published one)",
    )
    sub.add_argument(
        "--hardware",
        default=None,
        help=f"profile: {', '.join(HARDWARE)} (default: {DEFAULT_HARDWARE['study']} with --fidelity study, "
        f"else {DEFAULT_HARDWARE['faithful']})",
    )
    sub.add_argument("--fidelity", default="faithful", help=f"{' | '.join(FIDELITIES)} (default: faithful)")
    sub.add_argument("--json", action="store_true", help="print one JSON document, times in seconds")


def _autoregressive_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--compile", action="store_true", help="faithful: the decode step compiled (no per-operator dispatch floor)"
    )


def _llada_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--block-length", type=int, required=True, help="tokens per semi-autoregressive block")
    sub.add_argument("--steps", type=int, required=True, help="diffusion steps in total (split evenly over blocks)")
    sub.add_argument(
        "--cfg-scale", type=nonnegative_number, default=0.0, help="classifier-free guidance scale (0 = off)"
    )
    sub.add_argument(
        "--temperature", type=nonnegative_number, default=0.0, help="sampling temperature (faithful sampler cost)"
    )
    sub.add_argument("--remasking", default="low_confidence", help="low_confidence | random (faithful sampler cost)")
    sub.add_argument(
        "--truncate-blocks",
        action="store_true",
        help="faithful: feed only prompt + blocks so far (the official sampler feeds the whole length)",
    )
    sub.add_argument(
        "--cache", default="none", help="faithful: none | prefix | dual (an accelerated variant's KV cache)"
    )
    sub.add_argument(
        "--forwards", type=int, default=None,
        help="faithful: the forwards a confidence rule ran (<= steps; default: the schedule's steps)",
    )


def _dream_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--steps", type=int, required=True, help="diffusion steps, each over prompt + generation")
    sub.add_argument(
        "--temperature", type=nonnegative_number, default=0.0, help="sampling temperature (faithful sampler cost)"
    )
    sub.add_argument("--alg", default="entropy", help=f"{' | '.join(DREAM_ALGS)} (faithful sampler cost)")
    sub.add_argument("--top-p", type=float, default=None, help="top-p filter (its sort is not costed)")
    sub.add_argument("--top-k", type=int, default=None, help="top-k filter (its selection is not costed)")
    sub.add_argument(
        "--logits-positions", type=int, default=None,
        help="faithful: positions per sequence the LM head maps each step (default: the generation; "
        "the official code: prompt + generation)",
    )


def _block_diffusion_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--block-length", type=int, default=OFFICIAL_BLOCK_LENGTH,
                     help=f"tokens per block (default {OFFICIAL_BLOCK_LENGTH}, the official generate's)")
    sub.add_argument("--sub-block-length", type=int, default=OFFICIAL_SUB_BLOCK_LENGTH,
                     help=f"tokens per sub-block (default {OFFICIAL_SUB_BLOCK_LENGTH})")
    sub.add_argument(
        "--forwards", type=int, default=None,
        help="every forward a run made (prefill and completing ones included; default: the fixed schedule's K, "
        "threshold 1)",
    )
    sub.add_argument(
        "--temperature", type=nonnegative_number, default=0.0, help="sampling temperature (token choice cost)"
    )
    sub.add_argument("--sub-block-cache", action="store_true", help="the sub-block cache (official use_block_cache)")
    sub.add_argument(
        "--prefill-one-block-prompt", action="store_true", help="prefill a prompt of exactly one block (the official "
        "code feeds it to no forward)",
    )  # fmt: skip


# What each sampler of the registry adds to a family's subcommand, and how the subcommand says what it runs.
_SAMPLER_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "autoregressive": _autoregressive_arguments, "llada": _llada_arguments, "dream": _dream_arguments,
    "block_diffusion": _block_diffusion_arguments,
}
_SAMPLER_HELP = {
    "autoregressive": "prefill + autoregressive decode",
    "llada": "semi-autoregressive diffusion steps",
    "dream": "whole-sequence diffusion steps",
    "block_diffusion": "block diffusion against a KV cache of finished blocks",
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="llada-bench roofline", description=__doc__)
    subs = parser.add_subparsers(dest="arch", required=True, parser_class=_Parser)
    for fam in FAMILIES.values():
        sub = subs.add_parser(fam.name, help=f"{fam.title}: {_SAMPLER_HELP[fam.sampler]}")
        _common(sub, fam)
        _SAMPLER_ARGUMENTS[fam.sampler](sub)
    subs.add_parser("hardware", help="list the hardware profiles and their sources")
    return parser


def _hardware_table() -> str:
    rows = [
        f"{p.name}: tensor {p.peak_tensor_flops_per_s / 1e12:g} TFLOP/s, vector {p.peak_vector_ops_per_s / 1e12:g} "
        f"Top/s, {p.memory_bandwidth_bytes_per_s / 1e9:g} GB/s, {p.memory_bytes / (1 << 30):g} GiB"
        + (f", host floor {p.host_floor_s * 1e3:g} ms per {p.host_floor_layers}-layer eager forward" if p.host_floor_s
           else "")
        + f"\n    {p.source}"
        for p in HARDWARE.values()
    ]
    return "\n".join(rows) + "\n"


def _run(args: argparse.Namespace) -> str:
    if args.arch == "hardware":
        return _hardware_table()
    if args.fidelity not in FIDELITIES:
        raise RooflineInputError(f"unknown fidelity {args.fidelity!r}; allowed: {', '.join(FIDELITIES)}")
    hardware: HardwareProfile = get_hardware(args.hardware or DEFAULT_HARDWARE[args.fidelity])
    shape = preset_shape(args.arch, args.preset)
    fam = family(args.arch)
    base = Workload(prompt_len=args.prompt_len, gen_len=args.gen_len, batch=args.batch)
    if fam.sampler == "autoregressive":
        work = replace(base, compiled_decode=args.compile)
        ar, memory = estimate_llama(shape, hardware, work, args.fidelity), llama_memory(shape, work)
        return _json(llama_json(ar, memory)) if args.json else llama_text(ar, memory, hardware)
    if fam.sampler == "dream":
        work = replace(base, steps=args.steps, temperature=args.temperature, alg=args.alg, top_p=args.top_p,
                       top_k=args.top_k, logits_positions=args.logits_positions)  # fmt: skip
        dream, memory = estimate_dream(shape, hardware, work, args.fidelity), dream_memory(shape, work)
        return _json(dream_json(dream, memory)) if args.json else dream_text(dream, memory, hardware, title=fam.title)
    if fam.sampler == "block_diffusion":
        work = replace(
            base, block_length=args.block_length, sub_block_length=args.sub_block_length, temperature=args.temperature,
            forwards=args.forwards, sub_block_cache=args.sub_block_cache,
            prefill_one_block_prompt=args.prefill_one_block_prompt,
        )  # fmt: skip
        blocks = estimate_block_diffusion(shape, hardware, work, args.fidelity)
        memory = block_diffusion_memory(shape, work)
        if args.json:
            return _json(block_diffusion_json(blocks, memory))
        return block_diffusion_text(blocks, memory, hardware, title=fam.title)
    # What the sampler does with the logits sets both its time and its memory.
    work = replace(
        base, cfg_scale=args.cfg_scale, temperature=args.temperature, remasking=args.remasking, cache=args.cache,
        block_length=args.block_length, steps=args.steps, truncate_blocks=args.truncate_blocks, forwards=args.forwards,
    )  # fmt: skip
    llada, memory = estimate_llada(shape, hardware, work, args.fidelity), llada_memory(shape, work)
    return _json(llada_json(llada, memory)) if args.json else llada_text(llada, memory, hardware)


def _json(document: dict[str, object]) -> str:
    return json.dumps(document, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for a usage error, printed as one line on stderr)."""
    try:
        args = build_parser().parse_args(argv)
        output = _run(args)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (_UsageError, RooflineInputError) as exc:
        print(f"llada-bench roofline: error: {exc}", file=sys.stderr)
        return 2
    except KeyError as exc:  # unknown hardware or preset: the message lists the allowed names
        print(f"llada-bench roofline: error: {exc.args[0]}", file=sys.stderr)
        return 2
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
