"""Prompts and their reference continuations, cut in tokens from a dataset, and the batches a run uses.

Prompt id i is the i-th passage of the dataset with at least prompt + generation words (a count no
tokenizer enters), or with `prompts.join_passages` the i-th span of consecutive passages joined until it
has that many (specs/passages.py), so the same ids give the same text to both models of a sweep, each cut
to exactly its token lengths with its own tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from specs.loader import resolve_path
from specs.passages import (
    PassageError,
    count_spans,
    eligible_spans,
    is_local,
    local_passages,
    shortage_message,
)
from specs.schema import Prompts
from workers.errors import PromptsError

_WIKITEXT_TITLE = re.compile(r"^= (?!=).*(?<!=) =$")  # " = Robert Boulter = ": an article starts
_WIKITEXT_SECTION = re.compile(r"^= = .* = =$")  # " = = Career = = ": a section heading inside one


@dataclass(frozen=True)
class PromptExample:
    prompt_id: int
    prompt_ids: list[int]  # exactly prompt_length tokens (before any chat template)
    reference_ids: list[int]  # the next generation_length tokens of the same passage
    prompt_text: str
    reference_text: str


def load_prompt_examples(
    prompts: Prompts,
    tokenizer: PreTrainedTokenizerBase,
    prompt_length: int,
    generation_length: int,
    prompt_ids: list[int],
) -> list[PromptExample]:
    """The examples named by `prompt_ids`, in that order; an error naming the dataset if too few are long enough.

    A passage is long enough when it has at least prompt + generation whitespace-separated words. Counting
    words rather than tokens keeps the choice independent of the tokenizer, so LLaMA and LLaDA get the
    same passages for the same ids; and since no tokenizer here joins two words into one token, a passage
    that passes has at least that many tokens for every model.
    """
    if not prompt_ids:
        raise PromptsError("prompt_ids: a run needs at least one prompt")
    if min(prompt_ids) < 0:
        raise PromptsError(f"prompt_ids: ids are passage indices >= 0, got {min(prompt_ids)}")
    needed = max(prompt_ids) + 1
    total = prompt_length + generation_length
    eligible: list[str] = []
    for text in eligible_spans(read_passages(prompts), total, join=prompts.join_passages):
        eligible.append(text)
        if len(eligible) == needed:
            break
    if len(eligible) < needed:
        raise PromptsError(shortage_message(prompts.dataset, len(eligible), total, needed, join=prompts.join_passages))
    examples = []
    for prompt_id in prompt_ids:
        ids = tokenizer(eligible[prompt_id], add_special_tokens=False)["input_ids"][:total]
        if len(ids) < total:
            raise PromptsError(
                f"{prompts.dataset}: passage {prompt_id} has {len(ids)} tokens with {tokenizer.name_or_path!r}, "
                f"fewer than its words; the run needs {total}"
            )
        prompt, reference = ids[:prompt_length], ids[prompt_length:]
        examples.append(
            PromptExample(
                prompt_id=prompt_id,
                prompt_ids=prompt,
                reference_ids=reference,
                prompt_text=tokenizer.decode(prompt, skip_special_tokens=True),
                reference_text=tokenizer.decode(reference, skip_special_tokens=True),
            )
        )
    return examples


def prompt_batches(examples: Sequence[PromptExample], batch_size: int) -> list[list[PromptExample]]:
    """Consecutive chunks of `batch_size` examples, cycling through them when a chunk runs past the end.

    Batch k holds examples k*B, k*B+1, ... (mod count), so every example is in some batch, and a batch
    larger than the prompt set repeats prompts rather than changing the measured shape.
    """
    count = len(examples)
    if count == 0:
        raise PromptsError("a run needs at least one prompt")
    n_batches = -(-count // batch_size)
    return [[examples[(k * batch_size + j) % count] for j in range(batch_size)] for k in range(n_batches)]


# ---------------------------------------------------------------- reading datasets


def read_passages(prompts: Prompts) -> Iterator[str]:
    """Passages in dataset order: blank-line blocks of a .txt, rows of a .jsonl, rows of a hub dataset."""
    if is_local(prompts.dataset):
        try:
            yield from local_passages(resolve_path(prompts.dataset), prompts.text_field)
        except PassageError as exc:
            raise PromptsError(str(exc)) from None
    else:
        yield from _hub_passages(prompts)


def check_prompt_supply(prompts: Prompts, words: int, needed: int) -> None:
    """Fail before any model loads when a local dataset has too few passages (or spans) of `words` words.
    Hub datasets are checked when the prompts are cut (reading them needs `datasets`)."""
    if not is_local(prompts.dataset):
        return
    found = count_spans(read_passages(prompts), words, join=prompts.join_passages, enough=needed)
    if found < needed:
        raise PromptsError(shortage_message(prompts.dataset, found, words, needed, join=prompts.join_passages))


def _hub_passages(prompts: Prompts) -> Iterator[str]:
    """Passages of a hub dataset through `datasets` (imported only here; it is not a hard dependency).

    Wikitext stores one paragraph per row with " = Title = " rows starting each article; there a passage
    is a whole article (its paragraphs joined, section headings dropped), so long prompts exist. Other
    datasets give one passage per non-empty row.
    """
    try:
        import datasets
    except ImportError:
        raise PromptsError(
            f"prompts.dataset: {prompts.dataset!r} is a hub dataset and needs the 'datasets' package: "
            "pip install datasets (or point prompts.dataset at a local .txt/.jsonl file)"
        ) from None
    try:
        rows = datasets.load_dataset(prompts.dataset, prompts.config, split=prompts.split)
    except Exception as exc:  # offline, unknown id, unknown config: datasets raises many types
        raise PromptsError(
            f"prompts.dataset: cannot load {prompts.dataset!r} (config {prompts.config!r}, split "
            f"{prompts.split!r}): {exc}. Offline? Pre-download it with "
            f"python -c \"import datasets; datasets.load_dataset({prompts.dataset!r}, {prompts.config!r})\""
        ) from exc
    article: list[str] = []
    grouped = False  # True from the first article title on: wikitext-style rows
    for row in rows:
        text = row.get(prompts.text_field)
        if not isinstance(text, str):
            raise PromptsError(f"prompts.text_field: {prompts.dataset!r} rows have no string field {prompts.text_field!r}")
        line = text.strip()
        if not line or _WIKITEXT_SECTION.match(line):
            continue
        if _WIKITEXT_TITLE.match(line):
            if article:
                yield "\n".join(article)
            article, grouped = [], True
        elif grouped:
            article.append(line)
        else:
            yield line
    if article:
        yield "\n".join(article)
