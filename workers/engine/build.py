"""`just engine`: build llama.cpp (through llama-cpp-python's source) once, cache it outside the checkout, install it.

    python -m workers.engine.build [--jobs N] [--cuda] [--cache DIR]

Each stage is skipped when its output is there and whole, so a rerun after an interruption resumes (the CMake tree
is kept, so even a half-compiled build goes on where it stopped) and a rerun after success only checks:
1. the pinned source distribution from the package registry (`pip download`), its sha256 recorded;
2. llama.cpp's converter, unpacked from the same source;
3. the wheel, built with only what the package uses: libllama and ggml, no tools, examples, tests, server or
   multimodal library (`CMAKE_ARGS` below, recorded); `--cuda` adds ggml's CUDA backend (needs nvcc);
4. the wheel installed into this environment, its dependencies pinned by constraints.txt (diskcache is the one
   the package does not have already), and the converter's sentencepiece.
Every stage writes into a temporary folder and renames it into place.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata, util
from pathlib import Path

from specs.artifacts import sha256_file
from specs.engines import LLAMA_CPP_DISTRIBUTION, LLAMA_CPP_PYTHON_VERSION
from workers.engine.build_record import BUILD_RECORD, build_dir

PACKAGE = "llama-cpp-python"
CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints.txt"
CMAKE_FLAGS = ("-DLLAVA_BUILD=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
               "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_SERVER=OFF")
CUDA_FLAGS = ("-DGGML_CUDA=ON",)
# What the converter needs from the source: its entry script, its per-architecture package and its gguf writer.
CONVERTER_MEMBERS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
# The converter imports sentencepiece before it looks for a tokenizer.model (LLaMA's vocabulary path).
CONVERTER_NEEDS = ("sentencepiece",)


def _say(message: str) -> None:
    print(f"engine: {message}", flush=True)


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def fetch_sdist(root: Path) -> Path:
    """The pinned source distribution, downloaded once."""
    folder = root / "sdist"
    found = sorted(folder.glob("*.tar.gz")) if folder.is_dir() else []
    if found:
        return found[0]
    _say(f"downloading {PACKAGE}=={LLAMA_CPP_PYTHON_VERSION} (source, about 77 MB)")
    with tempfile.TemporaryDirectory(dir=root, prefix=".sdist-") as scratch:
        _pip("download", "--no-deps", "--no-binary", ":all:", "-q", "-d", scratch,
             f"{PACKAGE}=={LLAMA_CPP_PYTHON_VERSION}")
        tarball = next(Path(scratch).glob("*.tar.gz"))
        staged = Path(scratch) / "sdist"
        staged.mkdir()
        tarball.rename(staged / tarball.name)
        shutil.rmtree(folder, ignore_errors=True)
        staged.rename(folder)
    return next(folder.glob("*.tar.gz"))


def unpack_converter(root: Path, sdist: Path) -> Path:
    """llama.cpp's converter from the vendored source of the same distribution."""
    folder = root / "converter"
    if (folder / "convert_hf_to_gguf.py").is_file():
        return folder
    _say("unpacking llama.cpp's converter")
    with tempfile.TemporaryDirectory(dir=root, prefix=".converter-") as scratch, tarfile.open(sdist) as archive:
        prefix = f"{sdist.name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
        members = [m for m in archive.getmembers()
                   if m.name.startswith(prefix) and m.name[len(prefix):].startswith(CONVERTER_MEMBERS)]
        for member in members:
            member.name = member.name[len(prefix):]
        archive.extractall(Path(scratch) / "converter", members=members, filter="data")
        (Path(scratch) / "converter").rename(folder)
    return folder


def build_wheel(root: Path, sdist: Path, *, jobs: int, cuda: bool) -> tuple[Path, float]:
    """The wheel, built with the recorded flags (seconds 0 where it was there already); a CUDA build keeps its own
    wheel and CMake tree beside the CPU one."""
    flavour = "-cuda" if cuda else ""
    folder = root / f"wheel{flavour}"
    found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if found:
        return found[0], 0.0
    flags = " ".join(CMAKE_FLAGS + (CUDA_FLAGS if cuda else ()))
    _say(f"building libllama with {jobs} jobs (CMAKE_ARGS={flags}); about 4 minutes on 2 cores, resumable")
    env = {**os.environ, "CMAKE_ARGS": flags, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=root, prefix=".wheel-") as scratch:
        _pip("wheel", "--no-deps", "-q", "-w", scratch, "-C", f"build-dir={root / f'build{flavour}'}", str(sdist), env=env)
        staged = Path(scratch) / "wheel"
        staged.mkdir()
        for wheel in Path(scratch).glob("*.whl"):
            wheel.rename(staged / wheel.name)
        staged.rename(folder)
    return next(folder.glob("*.whl")), time.perf_counter() - started


def install(wheel: Path) -> None:
    """Install the wheel here unless this very version is installed already."""
    try:
        installed = metadata.version(LLAMA_CPP_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        installed = None
    if installed == LLAMA_CPP_PYTHON_VERSION and all(util.find_spec(m) for m in CONVERTER_NEEDS):
        _say(f"{PACKAGE} {installed} is installed")
        return
    _say(f"installing {wheel.name}")
    pins = ["-c", str(CONSTRAINTS)] if CONSTRAINTS.is_file() else []  # its few dependencies at the tested versions
    _pip("install", "-q", *pins, "--force-reinstall", "--no-deps", str(wheel))
    _pip("install", "-q", *pins, str(wheel), *CONVERTER_NEEDS)


def _compiler() -> str:
    try:
        return subprocess.run(["cc", "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="just engine", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile jobs")
    parser.add_argument("--cuda", action="store_true", help="add ggml's CUDA backend (needs the CUDA toolkit)")
    parser.add_argument("--cache", type=Path, default=None, help="the engine cache (default: LLADA_BENCH_ENGINE_CACHE)")
    args = parser.parse_args(argv)
    root = build_dir(args.cache)
    root.mkdir(parents=True, exist_ok=True)
    try:
        sdist = fetch_sdist(root)
        unpack_converter(root, sdist)
        wheel, seconds = build_wheel(root, sdist, jobs=args.jobs, cuda=args.cuda)
        install(wheel)
    except subprocess.CalledProcessError as exc:
        print(f"engine: {' '.join(exc.cmd[:4])} ... failed (exit {exc.returncode}); rerun `just engine` to resume",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("engine: interrupted; rerun `just engine` to resume where it stopped", file=sys.stderr)
        return 130
    record_path = root / BUILD_RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    record.update({
        "package": PACKAGE, "version": LLAMA_CPP_PYTHON_VERSION, "sdist": sdist.name, "sdist_sha256": sha256_file(sdist),
        "wheel": wheel.name, "wheel_sha256": sha256_file(wheel),
        "cmake_args": list(CMAKE_FLAGS + (CUDA_FLAGS if args.cuda else ())), "compiler": _compiler(),
    })
    if seconds:
        record.update({"build_seconds": round(seconds, 1), "jobs": args.jobs})
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    _say(f"ready: {PACKAGE} {LLAMA_CPP_PYTHON_VERSION} from {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
