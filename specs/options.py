"""Argument types for the command lines: each number is checked for range and finiteness when it is parsed,
so `nan`, `inf`, a negative or a word is one line naming the option, before anything runs."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """A whole number of 1 or more (workers, steps, threads)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; give 1 or more")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not allowed; give a finite number")
    return value


def positive_number(text: str) -> float:
    """A finite number above zero (a duration, a limit)."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not allowed; give a finite number above 0")
    return value


def nonnegative_number(text: str) -> float:
    """A finite number of 0 or more (a temperature, a guidance scale)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not allowed; give a finite number of 0 or more")
    return value


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr naming the option (exit 2), without the usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")
