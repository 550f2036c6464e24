"""Dream's `graph` variant on a CPU: the step forward over static buffers, compiled by inductor (a CPU has no
CUDA graphs), gives the eager sampler's tokens, generation after generation, from one compiled signature."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from tests.dream_golden.tiny_checkpoint import MASK_ID, PAD_ID
from tests.dream_models import golden_checkpoint, load_dream
from workers.samplers.dream.sampler import dream_generate
from workers.samplers.dream.graphs import DreamGraphs

IDS = torch.tensor([[PAD_ID, PAD_ID, 20, 21, 22], [30, 31, 32, 33, 34], [PAD_ID, 40, 41, 42, 43]])
MASK = (IDS != PAD_ID).long()
GEN = {"gen_length": 8, "steps": 4, "mask_id": MASK_ID}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Qwen2ForCausalLM:
    return load_dream(golden_checkpoint(tmp_path_factory.mktemp("dream")))


def _generate(model: Qwen2ForCausalLM, graphs: DreamGraphs | None, **settings: object) -> torch.Tensor:
    return dream_generate(
        model,
        IDS,
        attention_mask=MASK,
        graphs=graphs,
        generator=torch.Generator().manual_seed(0),
        **GEN,
        **settings,
    )


@pytest.mark.slow
def test_graph_variant_is_token_exact_with_eager_in_every_generation(model: Qwen2ForCausalLM) -> None:
    graphs = DreamGraphs(model, rows=3, length=IDS.shape[1] + GEN["gen_length"])
    for settings in ({"alg": "entropy"}, {"alg": "origin", "temperature": 0.9, "top_p": 0.95}):
        eager = _generate(model, None, **settings)
        assert torch.equal(_generate(model, graphs, **settings), eager)
    # One signature for every step of both generations (the window never widened); compiling it was timed.
    assert graphs.graphs == 1 and graphs.preparation.seconds > 0
    assert len(graphs.outputs) == 1 and graphs.output_bytes == 3 * GEN["gen_length"] * 256 * 4


def test_a_forward_captured_for_another_shape_is_refused(model: Qwen2ForCausalLM) -> None:
    graphs = DreamGraphs(model, rows=2, length=13)
    with pytest.raises(ValueError, match="rows"):
        _generate(model, graphs, alg="entropy")
