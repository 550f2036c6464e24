#!/usr/bin/env python3
"""Regenerate container/requirements.lock: the image's whole Python stack, pinned, with sha256 hashes.

`just lock` runs this. It resolves pyproject.toml's dependencies (extras `gpu`, `data` and `test`: the image
runs its own tests) plus container/requirements.in with uv for the image's target (CPython of stack.env,
x86_64 manylinux_2_28) against PyPI, then swaps flash-attn's PyPI sdist for its prebuilt CUDA wheel
(FLASH_ATTN_WHEEL below). The current lock seeds the resolution (uv keeps its pins where they still fit), and a
package the lock does not pin yet takes constraints.txt's version when it has one, so the image's test tools
are the ones CI runs.

Run it where PyPI is reachable; GitHub is needed only to re-verify the flash-attn wheel's sha256 (when it
is unreachable the recorded hash is kept and the lock says so). Needs `uv` at stack.env's UV_VERSION.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

CONTAINER = Path(__file__).resolve().parent
ROOT = CONTAINER.parent
LOCK = CONTAINER / "requirements.lock"
INPUTS = CONTAINER / "requirements.in"
STACK = CONTAINER / "stack.env"
CONSTRAINTS = ROOT / "constraints.txt"
PLATFORM = "x86_64-manylinux_2_28"
INDEX = "https://pypi.org/simple"

# The official prebuilt wheel of flash-attn 2.8.3 for CUDA 12, torch 2.7, CPython 3.13, C++11 ABI (torch 2.7's
# PyPI wheels use the C++11 ABI). Its sha256 was recorded from a published hash list of the v2.8.3 release
# assets, not downloaded on the machine that wrote this lock; every build checks it, and this script
# recomputes it whenever github.com is reachable.
FLASH_ATTN_WHEEL = (
    "https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3/"
    "flash_attn-2.8.3%2Bcu12torch2.7cxx11abiTRUE-cp313-cp313-linux_x86_64.whl"
)
FLASH_ATTN_SHA256 = "021d42573e294ee9d7fac94e1f822cb77e49d26eba5b7375d0057ec68abbdc32"
DOWNLOAD_TIMEOUT_S = 120


def read_stack(path: Path = STACK) -> dict[str, str]:
    """stack.env as a dict (KEY=value lines; '#' comments)."""
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def torch_pin(inputs: Path = INPUTS) -> str:
    """The `torch==...` line of requirements.in (passed to uv as an override)."""
    for line in inputs.read_text(encoding="utf-8").splitlines():
        if re.match(r"^torch\s*==", line):
            return line.strip()
    raise SystemExit(f"{inputs}: no 'torch==<version>' line")


FLASH_ATTN_ENTRY = re.compile(
    r"^(?:# prebuilt wheel[^\n]*\n)?flash-attn @ \S+ \\\n(?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+", re.MULTILINE
)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def seed(lock_text: str) -> str:
    """The current lock as uv's starting point: its pins, less the flash-attn wheel (uv resolves the sdist)."""
    return FLASH_ATTN_ENTRY.sub("", lock_text)


def new_pins(lock_text: str, constraints_text: str) -> str:
    """constraints.txt's pins for the packages the lock does not pin yet (uv --constraint lines)."""
    locked = {_name(name) for name, _ in PIN.findall(lock_text)} | {"flash-attn"}
    return "".join(
        f"{name}=={version}\n" for name, version in PIN.findall(constraints_text) if _name(name) not in locked
    )


def compile_lock(uv: str, stack: dict[str, str], out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        overrides = Path(tmp) / "overrides.txt"
        overrides.write_text(torch_pin() + "\n", encoding="utf-8")
        current = LOCK.read_text(encoding="utf-8") if LOCK.exists() else ""
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text(new_pins(current, CONSTRAINTS.read_text(encoding="utf-8")), encoding="utf-8")
        out.write_text(seed(current), encoding="utf-8")
        command = [
            uv,
            "pip",
            "compile",
            "pyproject.toml",
            str(INPUTS.relative_to(ROOT)),
            "--extra",
            "gpu",
            "--extra",
            "data",
            "--extra",
            "test",
            "--override",
            str(overrides),
            "--constraint",
            str(constraints),
            "--python-version",
            stack["PYTHON_VERSION"],
            "--python-platform",
            PLATFORM,
            "--index-url",
            INDEX,
            "--generate-hashes",
            "--no-config",
            "--quiet",
            "--custom-compile-command",
            "just lock",
            "--output-file",
            str(out),
        ]
        subprocess.run(command, cwd=ROOT, check=True)
        # uv names its scratch files in the `# via` notes: name the files those pins come from instead, so
        # that regenerating an unchanged lock changes nothing.
        text = out.read_text(encoding="utf-8")
        text = text.replace(str(constraints), CONSTRAINTS.name).replace(str(overrides), INPUTS.name)
        out.write_text(text, encoding="utf-8")


def flash_attn_hash() -> tuple[str, bool]:
    """The wheel's sha256 and whether it was computed here (False: the recorded one, unverified)."""
    try:
        digest = hashlib.sha256()
        with urllib.request.urlopen(FLASH_ATTN_WHEEL, timeout=DOWNLOAD_TIMEOUT_S) as response:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                digest.update(chunk)
    except (urllib.error.URLError, OSError) as exc:
        print(
            f"warning: cannot download the flash-attn wheel ({exc}); keeping the recorded sha256",
            file=sys.stderr,
        )
        return FLASH_ATTN_SHA256, False
    computed = digest.hexdigest()
    if computed != FLASH_ATTN_SHA256:
        raise SystemExit(
            f"flash-attn wheel sha256 {computed} differs from the recorded {FLASH_ATTN_SHA256}; "
            "check the release asset, then update FLASH_ATTN_SHA256 in container/lock.py"
        )
    return computed, True


def swap_flash_attn(text: str, sha256: str, verified: bool) -> str:
    """Replace the `flash-attn==X` entry (sdist hashes) with the prebuilt wheel's URL and hash."""
    entry = re.compile(
        r"^flash-attn==(?P<version>\S+) \\\n(?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+", re.MULTILINE
    )
    found = entry.search(text)
    if found is None:
        raise SystemExit("the compiled lock has no flash-attn entry to swap for the prebuilt wheel")
    if found["version"] not in FLASH_ATTN_WHEEL:
        raise SystemExit(
            f"requirements.in resolves flash-attn {found['version']} but FLASH_ATTN_WHEEL is another release"
        )
    note = (
        "verified by lock.py"
        if verified
        else "recorded from the release's published hash list, not re-downloaded"
    )
    wheel = (
        f"# prebuilt wheel instead of the PyPI sdist; sha256 {note}\n"
        f"flash-attn @ {FLASH_ATTN_WHEEL} \\\n"
        f"    --hash=sha256:{sha256}\n"
    )
    return text[: found.start()] + wheel + text[found.end() :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output", type=Path, default=LOCK, help=f"where to write (default {LOCK.relative_to(ROOT)})"
    )
    args = parser.parse_args(argv)
    stack = read_stack()
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit(f"uv is not on PATH: pip install uv=={stack['UV_VERSION']}")
    version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    if version != stack["UV_VERSION"]:
        print(
            f"warning: uv {version} differs from stack.env's UV_VERSION {stack['UV_VERSION']}",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "requirements.lock"
        compile_lock(uv, stack, raw)
        sha256, verified = flash_attn_hash()
        text = swap_flash_attn(raw.read_text(encoding="utf-8"), sha256, verified)
    header = (
        f"# Target: CPython {stack['PYTHON_VERSION']}, {PLATFORM}, index {INDEX} "
        "(torch 2.7.1 there is the CUDA 12.6 build).\n"
        "# Installed by container/install-stack.sh with --require-hashes; see container/README-section.md.\n"
    )
    args.output.write_text(header + text, encoding="utf-8")
    print(f"wrote {args.output} ({text.count('--hash=')} hashes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
