"""Prompts: cut to exactly P tokens with the next N_out as reference; batches; chat templates; decoding."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest
import torch

from specs.schema import Prompts
from workers.errors import PromptsError, SpecMismatchError
from workers.models.tokenization import (
    chat_frame,
    decode_generation,
    default_prefix_ids,
    eos_token_ids,
    model_input_ids,
    synthetic_tokenizer,
)
from workers.prompts import load_prompt_examples, prompt_batches, read_passages

SHIPPED = Prompts(dataset="specs/data/prompts.txt", count=8)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tokenizer():
    return synthetic_tokenizer()


def test_prompt_and_reference_are_consecutive_tokens_of_one_passage(tokenizer) -> None:
    examples = load_prompt_examples(SHIPPED, tokenizer, 32, 24, [0, 1, 5])
    passages = list(read_passages(SHIPPED))
    assert [e.prompt_id for e in examples] == [0, 1, 5]
    for example in examples:
        full = tokenizer(passages[example.prompt_id], add_special_tokens=False)["input_ids"]
        assert len(example.prompt_ids) == 32 and len(example.reference_ids) == 24
        assert example.prompt_ids + example.reference_ids == full[:56]
        assert example.reference_text == tokenizer.decode(example.reference_ids, skip_special_tokens=True)
        assert example.prompt_text == tokenizer.decode(example.prompt_ids, skip_special_tokens=True)
    assert load_prompt_examples(SHIPPED, tokenizer, 32, 24, [0, 1, 5]) == examples  # deterministic


def test_prompt_id_counts_only_passages_long_enough(tokenizer, tmp_path: Path) -> None:
    long = " ".join(["word"] * 34)  # + a marker word: exactly the 35 tokens a 30 + 5 run needs
    (tmp_path / "p.txt").write_text(f"too short\n\n{long} one\n\n  \n\nshort again\n\n{long} two\n")
    prompts = Prompts(dataset=str(tmp_path / "p.txt"), count=2)
    examples = load_prompt_examples(prompts, tokenizer, 30, 5, [0, 1])
    assert tokenizer.decode(examples[1].reference_ids).endswith("two")
    assert "one" not in examples[1].reference_text and examples[0].reference_text.endswith("one")


def test_too_few_long_passages_is_an_error_naming_the_file(tokenizer, tmp_path: Path) -> None:
    (tmp_path / "few.txt").write_text("a b c\n\nd e f\n")
    prompts = Prompts(dataset=str(tmp_path / "few.txt"), count=1)
    with pytest.raises(PromptsError, match=r"few\.txt.*only 0 passages"):
        load_prompt_examples(prompts, tokenizer, 4, 4, [0])


def test_jsonl_prompts_use_the_text_field(tokenizer, tmp_path: Path) -> None:
    rows = [{"body": " ".join(["alpha"] * 20)}, {"body": ""}, {"body": " ".join(["beta"] * 20)}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    prompts = Prompts(dataset=str(tmp_path / "p.jsonl"), text_field="body", count=2)
    examples = load_prompt_examples(prompts, tokenizer, 8, 4, [0, 1])
    assert "beta" in examples[1].prompt_text
    bad = Prompts(dataset=str(tmp_path / "p.jsonl"), text_field="text", count=1)
    with pytest.raises(PromptsError, match="text_field"):
        load_prompt_examples(bad, tokenizer, 8, 4, [0])


def test_hub_dataset_without_datasets_says_how_to_install(tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_datasets(name: str, *args, **kwargs):
        if name == "datasets":
            raise ImportError("No module named 'datasets'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    prompts = Prompts(dataset="Salesforce/wikitext", config="wikitext-103-raw-v1", count=1)
    with pytest.raises(PromptsError, match="pip install datasets"):
        load_prompt_examples(prompts, tokenizer, 8, 8, [0])


def _fake_datasets(monkeypatch: pytest.MonkeyPatch, rows: list[dict]) -> None:
    import sys
    import types

    fake = types.SimpleNamespace(load_dataset=lambda name, config, split: rows)
    monkeypatch.setitem(sys.modules, "datasets", fake)


def test_wikitext_rows_become_whole_articles(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        {"text": ""}, {"text": " = Valkyria Chronicles = \n"}, {"text": ""}, {"text": " First paragraph . \n"},
        {"text": " = = Gameplay = = \n"}, {"text": " Second paragraph . \n"}, {"text": " = Tower Building = \n"},
        {"text": " Other article . \n"},
    ]  # fmt: skip
    _fake_datasets(monkeypatch, rows)
    prompts = Prompts(dataset="Salesforce/wikitext", config="wikitext-103-raw-v1", count=1)
    assert list(read_passages(prompts)) == ["First paragraph .\nSecond paragraph .", "Other article ."]


def test_other_hub_datasets_give_one_passage_per_row(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_datasets(monkeypatch, [{"story": "one tale"}, {"story": " "}, {"story": "two tales"}])
    prompts = Prompts(dataset="org/stories", text_field="story", count=1)
    assert list(read_passages(prompts)) == ["one tale", "two tales"]


class CharTokenizer:
    """A tokenizer with one token per character: many more tokens than words."""

    name_or_path = "chars"

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids)


def test_passage_choice_does_not_depend_on_the_tokenizer(tokenizer, tmp_path: Path) -> None:
    """Eligibility counts words, so a tokenizer that splits finer does not shift the prompt ids."""
    (tmp_path / "p.txt").write_text("red green blue\n\nthe cat sat down\n\none two three four five\n")
    prompts = Prompts(dataset=str(tmp_path / "p.txt"), count=2)
    words = load_prompt_examples(prompts, tokenizer, 2, 2, [0, 1])
    chars = load_prompt_examples(prompts, CharTokenizer(), 2, 2, [0, 1])
    assert [e.prompt_text for e in words] == ["the cat", "one two"]
    assert [e.prompt_text for e in chars] == ["th", "on"]


def test_batches_are_consecutive_chunks_cycling_when_short(tokenizer) -> None:
    examples = load_prompt_examples(SHIPPED, tokenizer, 8, 8, list(range(5)))
    ids = lambda batches: [[e.prompt_id for e in b] for b in batches]
    assert ids(prompt_batches(examples, 2)) == [[0, 1], [2, 3], [4, 0]]
    assert ids(prompt_batches(examples, 5)) == [[0, 1, 2, 3, 4]]
    assert ids(prompt_batches(examples, 8)) == [[0, 1, 2, 3, 4, 0, 1, 2]]


# ---------------------------------------------------------------- tokenization


LLAMA3_STYLE_TEMPLATE = (
    "{{ '[CLS]' }}{% for m in messages %}{{ m['role'] + ' : ' + m['content'] + ' [SEP] ' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant :' }}{% endif %}"
)


def test_chat_template_wraps_the_cut_prompt_ids(tokenizer) -> None:
    chat_tokenizer = type(tokenizer).from_pretrained(tokenizer.name_or_path)
    chat_tokenizer.chat_template = LLAMA3_STYLE_TEMPLATE
    examples = load_prompt_examples(SHIPPED, chat_tokenizer, 12, 4, [0, 1])
    batch = model_input_ids(chat_tokenizer, [e.prompt_ids for e in examples], chat=True, device=CPU)
    prefix, suffix = chat_frame(chat_tokenizer)
    assert prefix[0] == chat_tokenizer.cls_token_id and suffix[-1] == chat_tokenizer.convert_tokens_to_ids(":")
    for row, example in zip(batch.tolist(), examples):
        assert row == prefix + example.prompt_ids + suffix
        rendered = chat_tokenizer.apply_chat_template(
            [{"role": "user", "content": example.prompt_text}], tokenize=False, add_generation_prompt=True
        )
        assert chat_tokenizer.decode(row) == chat_tokenizer.decode(chat_tokenizer(rendered, add_special_tokens=False)["input_ids"])


# The chat template Meta-Llama-3-8B-Instruct ships (tokenizer_config.json); LLaDA-8B-Instruct's has the same
# shape with its own BOS. The BERT tokenizer gets the header and turn-end tokens as special tokens.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)


def test_llama3_chat_template_frames_the_prompt_once(tokenizer) -> None:
    chat_tokenizer = type(tokenizer).from_pretrained(tokenizer.name_or_path)
    specials = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    chat_tokenizer.add_special_tokens({"bos_token": specials[0], "additional_special_tokens": specials[1:]})
    chat_tokenizer.chat_template = LLAMA3_TEMPLATE
    bos, start, end, eot = (chat_tokenizer.convert_tokens_to_ids(t) for t in specials)
    prefix, suffix = chat_frame(chat_tokenizer)
    assert prefix[0] == bos and prefix.count(bos) == 1  # the template's BOS, not a second one
    assert prefix[1] == start and prefix[-1] == end
    assert suffix[0] == eot and suffix[1] == start and suffix[-1] == end
    assert chat_tokenizer.decode(suffix[2:-1]) == "assistant"
    batch = model_input_ids(chat_tokenizer, [[7592, 2088]], chat=True, device=CPU)
    assert batch.tolist() == [prefix + [7592, 2088] + suffix]
    assert eot in eos_token_ids(chat_tokenizer)


def test_chat_without_a_template_is_a_spec_error(tokenizer) -> None:
    with pytest.raises(SpecMismatchError, match="no chat template"):
        model_input_ids(tokenizer, [[1, 2, 3]], chat=True, device=CPU)


def test_plain_prompts_keep_exact_length_without_bos(tokenizer) -> None:
    assert default_prefix_ids(tokenizer) == []  # BERT: [CLS] is not a BOS
    batch = model_input_ids(tokenizer, [[5, 6, 7], [8, 9, 10]], chat=False, device=CPU)
    assert batch.tolist() == [[5, 6, 7], [8, 9, 10]]


def test_decode_stops_at_the_first_eos_for_both_models(tokenizer) -> None:
    word = tokenizer.convert_tokens_to_ids("hello")
    sep, pad = tokenizer.sep_token_id, tokenizer.pad_token_id
    assert decode_generation(tokenizer, [word, word, sep, sep, sep], (sep,)) == ("hello hello", 2)  # LLaDA's EOS tail
    assert decode_generation(tokenizer, [word, sep, word, word], (sep,)) == ("hello", 1)  # LLaMA runs past EOS
    assert decode_generation(tokenizer, [word, pad, word], (sep,)) == ("hello hello", 3)  # specials skipped
    assert decode_generation(tokenizer, [sep, word], (sep,)) == ("", 0)


def test_eos_ids_gather_config_tokenizer_and_turn_end(tokenizer) -> None:
    extended = type(tokenizer).from_pretrained(tokenizer.name_or_path)
    extended.add_special_tokens({"additional_special_tokens": ["<|eot_id|>"]})
    eot = extended.convert_tokens_to_ids("<|eot_id|>")
    assert eos_token_ids(extended, [7, 7, 9]) == (7, 9, eot)
    assert eos_token_ids(tokenizer) == (tokenizer.sep_token_id,)


def test_the_synthetic_tokenizer_cuts_long_passages_without_a_length_warning(tokenizer) -> None:
    """BERT's 512-position limit is not the synthetic model's: a 2048-token prompt must not log a warning."""
    from transformers.utils import logging as hf_logging

    records: list[str] = []

    class Collect(__import__("logging").Handler):
        def emit(self, record) -> None:  # noqa: ANN001
            records.append(record.getMessage())

    handler = Collect()
    hf_logging.get_logger("transformers").addHandler(handler)
    try:
        ids = tokenizer(" ".join(["word"] * 1500), add_special_tokens=False)["input_ids"]
    finally:
        hf_logging.get_logger("transformers").removeHandler(handler)
    assert len(ids) > 512
    assert not [r for r in records if "sequence length is longer" in r]
    assert tokenizer.model_max_length >= 1 << 20  # transformers warns once per tokenizer: earlier tests may have
