"""Where `just engine` keeps llama.cpp (outside any checkout) and what it recorded of the build.

`<engine cache>/llama-cpp-python-<version>/` holds `sdist/` (the registry's source distribution), `build/` (the
CMake tree, kept so an interrupted build resumes), `wheel/` (the built bindings with their libllama), `converter/`
(llama.cpp's convert_hf_to_gguf.py, its `conversion` package and its `gguf-py`, from the same source) and
`build.json` (version, source and wheel sha256, CMake flags, compiler, seconds). Pure Python: the driver may read it.
"""

from __future__ import annotations

import json
from pathlib import Path

from specs.engines import BUILD_COMMAND, LLAMA_CPP_PYTHON_VERSION, engine_cache

BUILD_RECORD = "build.json"


class EngineNotBuiltError(RuntimeError):
    """A piece of the engine `just engine` makes is missing; the message says to run it."""


def build_dir(cache: Path | None = None) -> Path:
    return (cache or engine_cache()) / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"


def converter_dir(cache: Path | None = None) -> Path:
    folder = build_dir(cache) / "converter"
    if not (folder / "convert_hf_to_gguf.py").is_file():
        raise EngineNotBuiltError(f"llama.cpp's converter is not at {folder}: run `{BUILD_COMMAND}`")
    return folder


def build_record(cache: Path | None = None) -> dict | None:
    """What the last finished `just engine` recorded, or None where it never finished."""
    path = build_dir(cache) / BUILD_RECORD
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
