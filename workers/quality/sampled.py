"""The autoregressive model's sampled reference: several samples per prompt, none of them tied to the run's batch.

One sample per prompt at T = 1 is a random variable, and a parity decided against it moves from sweep to sweep.
So each prompt is sampled `quality.llama_sampled_samples` times, and the report reads its median. The samples are
drawn in fixed chunks of the prompt set (SAMPLED_CHUNK prompts, in prompt order), each chunk and sample with
its own seed: the text is the same whatever the batch size of the run that scores it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from specs.results import Generation
from specs.schema import RunConfig
from workers.measure.scenario import generate_untimed
from workers.models.tokenization import model_input_ids

if TYPE_CHECKING:
    from workers.models.loading import LoadedModel
    from workers.prompts import PromptExample

SAMPLED_CHUNK = 8  # prompts per sampling pass, whatever the run's batch size

# (examples, outputs by chunk, chunk size) → one Generation per example: the runner's decoding.
Decode = Callable[[Sequence["PromptExample"], dict[int, torch.Tensor], int], list[Generation]]


def sample_seed(seed: int, sample: int, chunk: int) -> int:
    """The seed of one sample of one chunk of prompts: from the controls' seed, never from the batch."""
    digest = hashlib.sha256(f"llada-bench:sampled:{seed}:{sample}:{chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def sampled_generations(
    loaded: LoadedModel, config: RunConfig, examples: Sequence[PromptExample], decode: Decode, *, temperature: float
) -> list[list[Generation]]:
    """`quality.llama_sampled_samples` lists of one Generation per example, sampled at `temperature`."""
    chunks = [list(examples[start : start + SAMPLED_CHUNK]) for start in range(0, len(examples), SAMPLED_CHUNK)]
    inputs = [
        model_input_ids(loaded.tokenizer, [e.prompt_ids for e in chunk], config.model.chat, loaded.device)
        for chunk in chunks
    ]  # [chunk, P] each
    samples = []
    for sample in range(config.quality.llama_sampled_samples):
        outputs = {
            c: generate_untimed(loaded, config, ids, seed=sample_seed(config.controls.seed, sample, c),
                                temperature=temperature)
            for c, ids in enumerate(inputs)
        }  # fmt: skip
        samples.append(decode(examples, outputs, SAMPLED_CHUNK))
    return samples
