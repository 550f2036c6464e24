"""The command line of `just gpu-round` (container/gpu-round.sh, orchestrator/gpu_round/run.py), checked before
anything runs, dry run included: the standard library only, so that the wrapper checks it before a bundle is
unpacked, and each problem is one line naming the argument (exit 2). Relative paths are taken from `--cwd`,
the directory the wrapper was run in."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from specs.options import OneLineParser, positive_number

COMMAND_LIMIT_S = 600.0  # a lease's command runs 10 minutes at most
FIRST_CALL_S = 540.0  # the first call's deadline: a minute under the limit, for the machine's own start of it
DEFAULT_ROUND = "artifacts/gpu-round"
DEFAULT_TOY_ROUND = "artifacts/gpu-round-toy"  # a toy round never shares a GPU round's folder
OUT_NAMED = "$OUT (the environment variable --export defaults to)"
GOALS_FILE = "gpu-round.json"  # beside the pieces' tarballs in every export (orchestrator/gpu_round/state.py)


def is_export(folder: Path) -> bool:
    """Whether `folder` holds what a call exports: a piece's tarball or the goals' file."""
    return (folder / GOALS_FILE).is_file() or any(folder.glob("*.tar.gz"))


def call_budget(text: str) -> float:
    """Seconds a call may take: above 0 and at most one lease command's 600."""
    value = positive_number(text)
    if value > COMMAND_LIMIT_S:
        raise argparse.ArgumentTypeError(
            f"{text} is not allowed; a call runs at most {COMMAND_LIMIT_S:g} s (a lease's command limit)"
        )
    return value


def parser() -> OneLineParser:
    p = OneLineParser(prog="gpu-round", description="One GPU round in calls of at most 9 minutes.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan on h100-sxm and h200; run nothing")
    mode.add_argument("--goals", action="store_true", help="only score the goals from the round folder (on a CPU)")
    mode.add_argument("--toy", action="store_true",
                      help=f"the first call's pieces at toy shapes on this CPU, no CUDA needed (round {DEFAULT_TOY_ROUND})")
    p.add_argument("--round", type=Path, help=f"the round folder ({DEFAULT_ROUND})")
    p.add_argument("--bundle", type=Path, help="the offline bundle (container/gpu-bundle.sh)")
    p.add_argument("--budget", type=call_budget, default=FIRST_CALL_S,
                   help=f"seconds from the call's start to its deadline ({FIRST_CALL_S:g}; at most {COMMAND_LIMIT_S:g})")
    p.add_argument("--export", type=Path, help="pack each piece here the moment it ends (default: $OUT where set)")
    p.add_argument("--resume", type=Path, help="a folder an earlier call exported: its pieces further along come in")
    p.add_argument("--since", type=float, help=argparse.SUPPRESS)  # the wrapper's start, seconds since the epoch
    p.add_argument("--cwd", type=Path, help=argparse.SUPPRESS)  # the directory the wrapper was run in
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments with their paths made absolute, or exit 2 with one line naming the one at fault."""
    p = parser()
    args = p.parse_args(argv)
    base = (args.cwd or Path.cwd()).absolute()
    if args.round is None:
        args.round = Path(DEFAULT_TOY_ROUND if args.toy else DEFAULT_ROUND)
    args.export_named = "--export"  # what the user gave: errors and the call's first line name it
    if args.export is None and os.environ.get("OUT"):
        args.export, args.export_named = Path(os.environ["OUT"]), OUT_NAMED
    for name in ("round", "bundle", "export", "resume"):
        value = getattr(args, name)
        if value is not None:
            setattr(args, name, base / value)
    if args.bundle is not None and not (args.bundle / "wheels").is_dir():
        p.error(f"argument --bundle: {args.bundle} holds no wheels/; make one with container/gpu-bundle.sh DIR")
    if args.resume is not None and not args.resume.is_dir():
        p.error(f"argument --resume: {args.resume} is not a folder; give one an earlier call's --export filled")
    if args.resume is not None and not is_export(args.resume):
        p.error(f"argument --resume: {args.resume} holds no round's export (no <piece>.tar.gz, no {GOALS_FILE}); "
                "give the folder an earlier call's --export filled")
    for name, named in (("round", "--round"), ("export", args.export_named)):
        value = getattr(args, name)
        if value is not None and value.exists() and not value.is_dir():
            p.error(f"argument {named}: {value} exists and is not a folder")
    if args.export is not None and args.export.resolve().is_relative_to(args.round.resolve()):
        p.error(f"argument {args.export_named}: {args.export} lies inside the round folder {args.round}; export "
                "beside it")
    return args


if __name__ == "__main__":
    # The wrapper's check: what the call does (dry-run, goals or run) and the bundle folder (empty without one),
    # a line each; or exit 2 with the one line.
    checked = parse(sys.argv[1:])
    print("dry-run" if checked.dry_run else "goals" if checked.goals else "toy" if checked.toy else "run")
    print(checked.bundle or "")
