"""A checkpoint folder converted to GGUF by llama.cpp's own converter, cached beside a record of what it came from.

The converter is the one shipped with the engine's source (`just engine` keeps it under the engine cache), run in
a child process (`workers/engine/convert_child.py`) so its imports and its copy of the `gguf` package never meet
this process's. A GGUF is reused only while its record matches: the sha256 of every file of the checkpoint, the
output type and the converter's version; the record also carries the GGUF's own sha256, checked before reuse.
Writes are atomic (a temporary file in the same folder, then a rename), so an interrupted conversion leaves
nothing that looks finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specs.artifacts import sha256_file
from specs.engines import LLAMA_CPP_PYTHON_VERSION, engine_cache
from workers.engine.build_record import converter_dir

# The GGUF tensor type for each run dtype.
OUT_TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


class ConversionError(RuntimeError):
    """The converter failed; the message carries its last lines."""


def checkpoint_files(checkpoint: Path) -> dict[str, str]:
    """sha256 of every file the converter may read (the folder's top level), by name."""
    return {p.name: sha256_file(p, follow=True) for p in sorted(checkpoint.iterdir()) if p.is_file()}


def converted_gguf(checkpoint: Path, dtype: str, cache: Path | None = None) -> tuple[Path, dict]:
    """The GGUF of `checkpoint` at the run's dtype and its record, converted now unless a matching one is cached."""
    out_type = OUT_TYPES[dtype]
    files = checkpoint_files(checkpoint)
    key = hashlib.sha256(json.dumps([files, out_type, LLAMA_CPP_PYTHON_VERSION]).encode()).hexdigest()[:16]
    folder = (cache or engine_cache()) / "gguf"
    gguf = folder / f"{checkpoint.name}-{key}-{out_type}.gguf"
    record_path = gguf.with_suffix(".json")
    if gguf.is_file() and record_path.is_file():
        record = json.loads(record_path.read_text())
        if record.get("gguf_sha256") == sha256_file(gguf):
            return gguf, record
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _run_converter(checkpoint, gguf, out_type)
    record = {
        "source": str(checkpoint.resolve()), "source_files_sha256": files, "out_type": out_type,
        "converter": f"llama.cpp's convert_hf_to_gguf.py from llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}",
        "pre_tokenizer_registered": "gpt-2 (byte-level BPE tokenizers the converter does not know)",
        "gguf_sha256": sha256_file(gguf), "seconds": round(time.perf_counter() - started, 2),
    }
    _write_atomic(record_path, json.dumps(record, indent=2) + "\n")
    return gguf, record


def _run_converter(checkpoint: Path, gguf: Path, out_type: str) -> None:
    converter = converter_dir()
    with tempfile.TemporaryDirectory(dir=gguf.parent, prefix=".converting-") as scratch:
        partial = Path(scratch) / gguf.name
        command = [sys.executable, "-m", "workers.engine.convert_child", str(converter), str(checkpoint),
                   str(partial), out_type]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not partial.is_file():
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise ConversionError(f"llama.cpp's converter failed on {checkpoint} (exit {done.returncode}):\n{tail}")
        os.replace(partial, gguf)


def _write_atomic(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)
