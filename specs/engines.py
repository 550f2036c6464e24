"""The inference engines a model side runs in, described once as data: PyTorch (the package's own loops over
transformers' models) or llama.cpp (a production C/C++ engine, through its Python bindings).

An engine is an implementation variant of a side (`grid.llama.impl` / `grid.llada.impl`: `engine: llama.cpp`), so
every control (warm-up, repetitions, sessions, interleaving, timers) applies to it as to any variant. In llama.cpp
an autoregressive model decodes with llama.cpp's own batched decode; a diffusion model's forward runs in llama.cpp
with non-causal attention while the package's sampler keeps the official algorithm (only the forward is swapped),
so its tokens are the package's. What each engine can run is read from here, never from an `if engine ==`
elsewhere: the workers' one dispatch is workers/engine/__init__.py.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

EngineName = Literal["pytorch", "llama.cpp"]
PYTORCH: EngineName = "pytorch"
LLAMA_CPP: EngineName = "llama.cpp"

# llama.cpp comes from the package registry's source distribution of its Python bindings (docs/engine.md says why
# these bindings and not a build of the bare library): pinned, built once by `just engine`, cached outside checkouts.
LLAMA_CPP_DISTRIBUTION = "llama_cpp_python"
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
ENGINE_CACHE_ENV = "LLADA_BENCH_ENGINE_CACHE"
BUILD_COMMAND = "just engine"


class Engine(BaseModel):
    """One engine: the families it runs, and how it is had."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: EngineName
    title: str  # how the report names it
    families: tuple[str, ...]  # registry archs it runs
    needs_checkpoint: bool  # runs converted checkpoints only (synthetic weights exist as torch tensors only)


ENGINES: dict[str, Engine] = {
    PYTORCH: Engine(
        name=PYTORCH, title="PyTorch", families=("llama", "llada", "qwen2", "dream", "fast_dllm_v2"),
        needs_checkpoint=False,
    ),
    LLAMA_CPP: Engine(
        name=LLAMA_CPP, title="llama.cpp", families=("llama", "llada"),
        needs_checkpoint=True,
    ),
}


def engine(name: str) -> Engine:
    """The engine's entry; the error lists the engines that exist."""
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; allowed: {', '.join(ENGINES)}") from None


def engine_cache() -> Path:
    """Where `just engine` keeps its download, build and converted models: outside any checkout, so clones share
    it (LLADA_BENCH_ENGINE_CACHE, else ~/.cache/llada-bench/engine)."""
    configured = os.environ.get(ENGINE_CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "llada-bench" / "engine"


def engine_missing(name: str) -> str | None:
    """Why a spec that runs `name` cannot run here (one line with the command that fixes it), or None."""
    if name == PYTORCH:
        return None
    if importlib.util.find_spec("llama_cpp") is None:
        return (f"the llama.cpp engine is not installed in this environment: build it with `{BUILD_COMMAND}` (a "
                f"one-time build, about 4 minutes on 2 cores, cached under {engine_cache()})")
    try:
        installed = importlib.metadata.version(LLAMA_CPP_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        installed = "unknown"
    if installed != LLAMA_CPP_PYTHON_VERSION:
        return (f"the llama.cpp engine installed here is {LLAMA_CPP_DISTRIBUTION} {installed}, not the pinned "
                f"{LLAMA_CPP_PYTHON_VERSION}: rebuild it with `{BUILD_COMMAND}`")
    return None
