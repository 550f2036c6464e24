"""`llada-bench train` checks its arguments before any training, writes --out only as the sweeps' rule for users'
folders allows, and says on Ctrl-C that a rerun resumes."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch

from miniature.architecture import miniature_shape
from miniature.cli import main
from miniature.export import CHECKSUMS_FILE, verify_checksums, write_checksums
from miniature.pair_folder import PairFolderError, check_out, publish
from miniature.pipeline import CONTEXT, default_configs
from miniature.tokenizer import special_ids, train_tokenizer
from miniature.train_args import TrainArgumentError, ar_evaluation_tokens, check_deb, check_fine_tuning
from miniature.trainer import TrainConfig, kept_evaluations, train


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_token_budget_without_an_ar_evaluation_to_adapt_from_is_refused_before_anything(tmp_path: Path, capsys) -> None:
    work = tmp_path / "work"
    assert main(["--work-dir", str(work), "--out", str(tmp_path / "out"), "--tokens", "2000000"]) == 2
    err = _one_line_error(capsys)
    assert "--bd-tokens 1611904" in err and "--tokens 2000000" in err
    assert not work.exists() and not (tmp_path / "out").exists()  # nothing trained, nothing written
    # Every budget the refusal offers is one the AR run of that budget keeps an evaluation for.
    choices = [int(c) for c in re.search(r"one of (\d+(?:, \d+)*)", err).group(1).split(", ")]
    assert choices
    for choice in choices:
        check_fine_tuning(2_000_000, choice, default_configs(2_000_000)["llama"], CONTEXT)


def test_the_default_budget_passes_the_check_the_pipeline_relies_on() -> None:
    from miniature.block_diffusion_stage import DEFAULT_FINE_TUNE_TOKENS
    from miniature.pipeline import TOKEN_BUDGET

    check_fine_tuning(TOKEN_BUDGET, DEFAULT_FINE_TUNE_TOKENS, default_configs()["llama"], CONTEXT)
    with pytest.raises(TrainArgumentError, match="--bd-tokens 1611905"):
        check_fine_tuning(TOKEN_BUDGET, DEFAULT_FINE_TUNE_TOKENS + 1, default_configs()["llama"], CONTEXT)


def test_the_predicted_evaluations_are_those_a_run_keeps(tmp_path: Path) -> None:
    text = " ".join(f"module {i % 7} reads record {i % 5} before it exits." for i in range(600))
    tokenizer = train_tokenizer([text], vocab_size=300)
    special = special_ids(tokenizer)
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"])
    shape = dataclasses.replace(miniature_shape("llama", len(tokenizer), hidden_size=32, num_layers=1), context=16)
    config = TrainConfig(steps=7, batch_size=2, warmup_steps=1, eval_every=3, eval_windows=2, checkpoint_every=3)
    train(shape, special, ids, ids, config, tmp_path)
    assert ar_evaluation_tokens(config, shape.context) == [e["tokens"] for e in kept_evaluations(tmp_path)]


def test_a_deb_that_is_not_one_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    fake = tmp_path / "python3.11-doc_3.11.2-6_all.deb"
    fake.write_text("not an archive\n")
    work = tmp_path / "work"
    assert main(["--work-dir", str(work), "--out", str(tmp_path / "out"), "--deb", str(fake)]) == 2
    assert "not a Debian package" in _one_line_error(capsys)
    assert not work.exists()
    badly_named = tmp_path / "doc.deb"
    badly_named.write_bytes(b"!<arch>\ndebian-binary   rest")
    with pytest.raises(TrainArgumentError, match="not a Debian package file name"):
        check_deb(badly_named)
    well = tmp_path / "python3.11-doc_1_all.deb"
    well.write_bytes(b"!<arch>\ndebian-binary   rest")
    check_deb(well)


def test_a_users_folder_is_refused_before_training_and_left_as_it_was(tmp_path: Path, capsys) -> None:
    users = tmp_path / "mine"
    users.mkdir()
    (users / "provenance.json").write_text('{"mine": true}\n')
    assert main(["--work-dir", str(tmp_path / "work"), "--out", str(users)]) == 2
    assert "not empty and holds no pair" in _one_line_error(capsys)
    assert [p.name for p in users.iterdir()] == ["provenance.json"]
    assert (users / "provenance.json").read_text() == '{"mine": true}\n'
    assert not (tmp_path / "work").exists()


def _stage(folder: Path, weights: bytes) -> Path:
    (folder / "llama").mkdir(parents=True)
    (folder / "llama" / "model.safetensors").write_bytes(weights)
    (folder / "provenance.json").write_text(json.dumps({"training_rule": "r", "models": {}}))
    write_checksums(folder)
    return folder


def test_a_pair_is_replaced_in_its_own_folder_without_touching_or_listing_the_users_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    publish(_stage(tmp_path / "first", b"one"), out)
    (out / "notes.txt").write_text("mine")
    check_out(out)  # a pair of ours with the user's files beside it: writable
    publish(_stage(tmp_path / "second", b"two"), out)
    assert (out / "llama" / "model.safetensors").read_bytes() == b"two"
    assert (out / "notes.txt").read_text() == "mine"
    listed = (out / CHECKSUMS_FILE).read_text()
    assert "notes.txt" not in listed and "provenance.json" in listed and verify_checksums(out) == []
    # Before training, a file of the user's inside a member's folder is refused: the pair could write there.
    (out / "llama" / "my-eval.json").write_text("{}")
    with pytest.raises(PairFolderError, match=r"llama/my-eval.json not written by this command"):
        check_out(out)
    (out / "llama" / "my-eval.json").unlink()
    # A file of the user's where the pair would write one is refused by name, and kept.
    (out / "llada").mkdir()
    (out / "llada" / "config.json").write_text("mine")
    third = _stage(tmp_path / "third", b"three")
    (third / "llada").mkdir()
    (third / "llada" / "config.json").write_text("pair")
    with pytest.raises(PairFolderError, match=r"llada/config.json not written by this command"):
        publish(third, out)
    assert (out / "llada" / "config.json").read_text() == "mine"
    assert (out / "llama" / "model.safetensors").read_bytes() == b"two"


def test_ctrl_c_says_in_one_line_that_a_rerun_resumes(tmp_path: Path, capsys, monkeypatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("miniature.cli.run_pipeline", interrupted)
    assert main(["--work-dir", str(tmp_path / "work"), "--out", str(tmp_path / "out")]) == 130
    err = _one_line_error(capsys)
    assert "run the same command again to resume" in err and str(tmp_path / "work") in err
