"""`just engine` and the GGUF cache without building anything: each stage skipped where its output is whole, nothing
half-made left to look finished, a failed build told to resume, the converter's pre-tokenizer registered without
editing it, and a converted model reused only while its sources match."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from specs.engines import LLAMA_CPP_PYTHON_VERSION
from workers.engine import build, gguf_convert
from workers.engine.convert_child import GPT2_PRE_TOKENIZER, register_byte_level_bpe

SDIST = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"


def _fake_sdist(path: Path) -> Path:
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("convert_hf_to_gguf.py", "conversion/llama.py", "gguf-py/gguf/__init__.py", "src/llama.cpp",
                     "CMakeLists.txt"):
            data = f"# {name}\n".encode()
            info = tarfile.TarInfo(prefix + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_the_source_is_downloaded_once_and_only_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_pip(*args: str, env: dict | None = None) -> None:
        calls.append(args)
        _fake_sdist(Path(args[args.index("-d") + 1]) / SDIST)

    monkeypatch.setattr(build, "_pip", fake_pip)
    first = build.fetch_sdist(tmp_path)
    assert first == tmp_path / "sdist" / SDIST and len(calls) == 1
    assert build.fetch_sdist(tmp_path) == first and len(calls) == 1  # there already: no second download
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sdist-")]


def test_the_converter_is_unpacked_alone(tmp_path: Path) -> None:
    folder = build.unpack_converter(tmp_path, _fake_sdist(tmp_path / SDIST))
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == ["conversion/llama.py", "convert_hf_to_gguf.py", "gguf-py/gguf/__init__.py"]


def test_a_failed_build_leaves_no_wheel_and_says_a_rerun_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = build.build_dir(tmp_path)
    root.mkdir(parents=True)
    _fake_sdist((root / "sdist").mkdir() or root / "sdist" / SDIST)
    seen: dict = {}

    def failing_pip(*args: str, env: dict | None = None) -> None:
        seen.update(args=args, env=env)
        raise subprocess.CalledProcessError(1, ["pip", *args])

    monkeypatch.setattr(build, "_pip", failing_pip)
    assert build.main(["--cache", str(tmp_path), "--jobs", "2"]) == 1
    assert "rerun `just engine` to resume" in capsys.readouterr().err
    assert not (root / "wheel").exists() and (root / "converter" / "convert_hf_to_gguf.py").is_file()
    # the CMake tree is a folder of the cache's, kept between attempts; the flags leave out what the package never uses
    assert f"build-dir={root / 'build'}" in seen["args"]
    assert seen["env"]["CMAKE_BUILD_PARALLEL_LEVEL"] == "2" and "-DLLAMA_BUILD_TOOLS=OFF" in seen["env"]["CMAKE_ARGS"]


def test_a_finished_engine_is_only_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = build.build_dir(tmp_path)
    for folder in ("sdist", "wheel", "converter"):
        (root / folder).mkdir(parents=True)
    _fake_sdist(root / "sdist" / SDIST)
    (root / "wheel" / "llama_cpp_python-x.whl").write_bytes(b"wheel")
    (root / "converter" / "convert_hf_to_gguf.py").write_text("")
    monkeypatch.setattr(build, "_pip", lambda *a, **k: pytest.fail(f"pip ran: {a}"))
    monkeypatch.setattr(build, "install", lambda wheel: None)
    assert build.main(["--cache", str(tmp_path)]) == 0
    record = (root / "build.json").read_text()
    assert LLAMA_CPP_PYTHON_VERSION in record and "wheel_sha256" in record


class _KnownOnly:
    def get_vocab_base_pre(self, tokenizer: object) -> str:
        if getattr(tokenizer, "known", False):
            return "llama-bpe"
        raise NotImplementedError("unknown pre-tokenizer")


class _Tokenizer:
    def __init__(self, pre: str, known: bool = False) -> None:
        self.known = known
        self.backend_tokenizer = type("Backend", (), {"pre_tokenizer": type(pre, (), {})()})()


def test_an_unknown_byte_level_tokenizer_is_registered_as_gpt2_and_nothing_else_is() -> None:
    register_byte_level_bpe(_KnownOnly)
    model = _KnownOnly()
    assert model.get_vocab_base_pre(_Tokenizer("ByteLevel", known=True)) == "llama-bpe"
    assert model.get_vocab_base_pre(_Tokenizer("ByteLevel")) == GPT2_PRE_TOKENIZER
    with pytest.raises(NotImplementedError):
        model.get_vocab_base_pre(_Tokenizer("Metaspace"))


def test_a_converted_model_is_reused_only_while_its_sources_match(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = tmp_path / "llama"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    runs: list[Path] = []

    def fake_converter(source: Path, gguf: Path, out_type: str) -> None:
        runs.append(gguf)
        gguf.write_bytes(b"gguf " + source.joinpath("model.safetensors").read_bytes())

    monkeypatch.setattr(gguf_convert, "_run_converter", fake_converter)
    first, record = gguf_convert.converted_gguf(checkpoint, "float32", cache=tmp_path / "cache")
    assert record["out_type"] == "f32" and record["source_files_sha256"].keys() == {"config.json", "model.safetensors"}
    assert gguf_convert.converted_gguf(checkpoint, "float32", cache=tmp_path / "cache")[0] == first and len(runs) == 1
    first.write_bytes(b"damaged")  # a GGUF that is not what its record says is converted again
    gguf_convert.converted_gguf(checkpoint, "float32", cache=tmp_path / "cache")
    assert len(runs) == 2
    (checkpoint / "model.safetensors").write_bytes(b"retrained")  # new weights: a new GGUF, the old one kept
    second, _ = gguf_convert.converted_gguf(checkpoint, "float32", cache=tmp_path / "cache")
    assert second != first and len(runs) == 3
    assert gguf_convert.converted_gguf(checkpoint, "bfloat16", cache=tmp_path / "cache")[1]["out_type"] == "bf16"


def test_a_failed_conversion_leaves_nothing_that_looks_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = tmp_path / "llama"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    converter = tmp_path / "converter"
    converter.mkdir()
    (converter / "convert_hf_to_gguf.py").write_text("raise SystemExit('no such architecture')\n")
    monkeypatch.setattr(gguf_convert, "converter_dir", lambda: converter)
    with pytest.raises(gguf_convert.ConversionError, match="converter failed"):
        gguf_convert.converted_gguf(checkpoint, "float32", cache=tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache" / "gguf").iterdir()] == []
