"""`llada-bench roofline ...`: print the study's analyses (text or JSON) for a LLaMA or LLaDA generation."""

from __future__ import annotations

import argparse
import json
import sys

from roofline.errors import RooflineInputError
from roofline.fidelity import FIDELITIES
from roofline.hardware import HARDWARE, HardwareProfile, get_hardware
from roofline.llada import LladaEstimate, estimate_llada
from roofline.llama import LlamaEstimate, estimate_llama
from roofline.memory import llada_memory, llama_memory
from roofline.render import llada_json, llada_text, llama_json, llama_text
from specs.options import nonnegative_number
from specs.registry import PRESET_NAMES, preset_shape

# The study's hardware goes with the study's model; the faithful model defaults to the project's A100.
DEFAULT_HARDWARE = {"study": "study-a6000", "faithful": "a100-sxm4-80gb"}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (the caller prints it), not usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


def _common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--prompt-len", type=int, required=True, help="prompt tokens (the study's --input_prompt_length)"
    )
    sub.add_argument(
        "--gen-len", type=int, required=True, help="generated tokens (the study's --sequence_length)"
    )
    sub.add_argument("--batch", type=int, default=1, help="sequences per batch (faithful only; default 1)")
    sub.add_argument(
        "--preset", default="8b", help=f"model shape preset from specs.shapes: {', '.join(PRESET_NAMES)}"
    )
    sub.add_argument(
        "--hardware",
        default=None,
        help=f"profile: {', '.join(HARDWARE)} (default: {DEFAULT_HARDWARE['study']} with --fidelity study, "
        f"else {DEFAULT_HARDWARE['faithful']})",
    )
    sub.add_argument("--fidelity", default="faithful", help=f"{' | '.join(FIDELITIES)} (default: faithful)")
    sub.add_argument("--json", action="store_true", help="print one JSON document, times in seconds")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="llada-bench roofline", description=__doc__)
    subs = parser.add_subparsers(dest="arch", required=True, parser_class=_Parser)
    llama = subs.add_parser("llama", help="LLaMA: prefill + autoregressive decode")
    _common(llama)
    llada = subs.add_parser("llada", help="LLaDA: semi-autoregressive diffusion steps")
    _common(llada)
    llada.add_argument("--block-length", type=int, required=True, help="tokens per semi-autoregressive block")
    llada.add_argument(
        "--steps", type=int, required=True, help="diffusion steps in total (split evenly over blocks)"
    )
    llada.add_argument(
        "--cfg-scale", type=nonnegative_number, default=0.0, help="classifier-free guidance scale (0 = off)"
    )
    llada.add_argument(
        "--temperature", type=nonnegative_number, default=0.0, help="sampling temperature (faithful sampler cost)"
    )
    llada.add_argument(
        "--remasking", default="low_confidence", help="low_confidence | random (faithful sampler cost)"
    )
    llada.add_argument(
        "--truncate-blocks",
        action="store_true",
        help="faithful: feed only prompt + blocks so far (the official sampler feeds the whole length)",
    )
    llada.add_argument(
        "--cache", default="none", help="faithful: none | prefix | dual (an accelerated variant's KV cache)"
    )
    llada.add_argument(
        "--forwards", type=int, default=None,
        help="faithful: the forwards a confidence rule ran (<= steps; default: the schedule's steps)",
    )
    llama.add_argument(
        "--compile", action="store_true", help="faithful: the decode step compiled (no per-operator dispatch floor)"
    )
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
    run = {"prompt_len": args.prompt_len, "gen_len": args.gen_len, "batch": args.batch}
    est: LlamaEstimate | LladaEstimate
    if args.arch == "llama":
        est = estimate_llama(shape, hardware, **run, fidelity=args.fidelity, compiled_decode=args.compile)
        memory = llama_memory(shape, **run)
        to_json, to_text = llama_json, llama_text
    else:
        # What the sampler does with the logits sets both its time and its memory.
        sampler = {"cfg_scale": args.cfg_scale, "temperature": args.temperature, "remasking": args.remasking,
                   "cache": args.cache}
        est = estimate_llada(
            shape, hardware, **run, **sampler, block_length=args.block_length, steps=args.steps,
            fidelity=args.fidelity, truncate_blocks=args.truncate_blocks, forwards=args.forwards,
        )
        memory = llada_memory(shape, **run, **sampler)
        to_json, to_text = llada_json, llada_text
    if args.json:
        return json.dumps(to_json(est, memory), indent=2) + "\n"
    return to_text(est, memory, hardware)


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
