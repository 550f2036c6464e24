"""The sampled reference: several samples a prompt, the same texts whatever the batch size of the run that scores
them (one T = 1 draw per prompt, tied to the batch, moved the reference from sweep to sweep)."""

from __future__ import annotations

import pytest
import torch

from specs.schema import PerplexitySpec, QualitySpec
from tests.worker_fixtures import run_config
from workers.models.loading import load_model
from workers.prompts import load_prompt_examples
from workers.quality.sampled import SAMPLED_CHUNK, sample_seed, sampled_generations
from workers.runner import Worker

# A metric is on, or the sampled setting would be refused as read by nothing; sampling itself never calls the judge.
QUALITY = QualitySpec(perplexity=PerplexitySpec(evaluator="llama"), llama_sampled_temperature=1.0,
                      llama_sampled_samples=3)


def _sampled(loaded, batch: int) -> list[list[tuple[int, list[int]]]]:
    config = run_config("llama", batch_size=batch, quality=QUALITY, prompts={"count": 6}, prompt_ids=list(range(6)))
    examples = load_prompt_examples(config.prompts, loaded.tokenizer, config.prompt_length, config.generation_length,
                                    config.prompt_ids)
    samples = sampled_generations(loaded, config, examples,
                                  lambda ex, out, size: Worker._generations(loaded, list(ex), size, out),
                                  temperature=1.0)
    return [[(g.prompt_id, g.token_ids) for g in sample] for sample in samples]


@pytest.mark.slow
def test_the_sampled_reference_does_not_depend_on_the_batch() -> None:
    config = run_config("llama")
    loaded = load_model(config.model, config.controls, torch.device("cpu"))
    at_one, at_four = _sampled(loaded, 1), _sampled(loaded, 4)
    assert at_one == at_four
    assert len(at_one) == 3 and all([p for p, _ in sample] == list(range(6)) for sample in at_one)
    # Three samples of one prompt are three texts, not one text three times.
    assert len({tuple(sample[0][1]) for sample in at_one}) == 3


def test_each_sample_and_chunk_has_its_own_seed() -> None:
    seeds = {sample_seed(0, s, c) for s in range(4) for c in range(3)}
    assert len(seeds) == 12 and sample_seed(0, 1, 2) == sample_seed(0, 1, 2) != sample_seed(1, 1, 2)
    assert SAMPLED_CHUNK >= 1
