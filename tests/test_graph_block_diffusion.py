"""Block diffusion's `graph` variant on a CPU: the in-block forwards over static buffers, compiled by inductor (a CPU
has no CUDA graphs), give the eager sampler's tokens and forwards, generation after generation, from one signature
per kind of forward and block; the prefill stays eager."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import Qwen2ForCausalLM

from tests.fast_dllm_golden.cases import prompt
from tests.fast_dllm_golden.tiny_checkpoint import MASK_ID
from specs.schema import BlockDiffusionImpl
from tests.fast_dllm_models import golden_checkpoint, load_fast_dllm
from tests.test_block_diffusion_runs import bd_config
from workers.measure.compiled_steps import CompiledSteps, forward_capture, uses_compiled_steps
from workers.samplers.block_diffusion.graphs import BlockDiffusionGraphs
from workers.samplers.block_diffusion.sampler import BlockDiffusionSampler, block_diffusion_steps

IDS = torch.tensor(prompt(2, 11))
# One block [8, 16) of 5 masks in two sub-blocks, then its completing forward: the 6th token.
GEN = {"max_new_tokens": 8, "gen_length": 6, "block_length": 8, "sub_block_length": 4, "mask_id": MASK_ID,
       "threshold": 0.7, "sub_block_cache": True}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Qwen2ForCausalLM:
    return load_fast_dllm(golden_checkpoint(tmp_path_factory.mktemp("fast-dllm")))


def _generate(model: Qwen2ForCausalLM, graphs: BlockDiffusionGraphs | None, ids: torch.Tensor = IDS) -> BlockDiffusionSampler:
    sampler = block_diffusion_steps(model, ids, graphs=graphs, **GEN)
    for _ in sampler:
        pass
    return sampler


@pytest.mark.slow
def test_graph_variant_is_token_exact_with_eager_in_every_generation(model: Qwen2ForCausalLM) -> None:
    eager = _generate(model, None)
    kinds = {entry[2] is not None for entry in eager.forward_log}
    assert kinds == {True, False}  # sub-block forwards and whole-block ones both ran
    graphs = BlockDiffusionGraphs(model, rows=2)
    for _ in range(2):
        replayed = _generate(model, graphs)
        assert torch.equal(replayed.sequences, eager.sequences) and replayed.forward_log == eager.forward_log
    # The block's whole-block, sub-block and completing forwards: three signatures, compiled once, timed as preparation.
    assert graphs.graphs == 3 and graphs.preparation.seconds > 0
    assert replayed.kv_cache is graphs.cache and graphs.cache.layers[0].index is not None  # written at device indices


def test_graphs_refuse_another_shape(model: Qwen2ForCausalLM) -> None:
    graphs = BlockDiffusionGraphs(model, rows=2)
    graphs.prepare(2, 16)
    with pytest.raises(ValueError, match="built for 2 rows of 16 cached positions, not 3 of 16"):
        graphs.prepare(3, 16)
    with pytest.raises(ValueError, match="not 2 of 24"):
        _generate(model, graphs, torch.tensor(prompt(2, 19)))


def test_the_runs_graphs_are_one_set_per_batch_shape(model: Qwen2ForCausalLM) -> None:
    """The runner's builder hands the variant its graphs, one set per batch shape, kept between generations and
    timed into the run's preparation."""
    config = bd_config(impl=BlockDiffusionImpl(name="graph", graph=True))
    assert uses_compiled_steps(config) and forward_capture(config, torch.device("cuda")) == "cuda graph"
    steps = CompiledSteps()
    loaded = SimpleNamespace(model=model)
    first = steps.block_diffusion_for_batch(loaded, config, IDS)  # type: ignore[arg-type]
    assert steps.block_diffusion_for_batch(loaded, config, IDS) is first  # type: ignore[arg-type]
    assert steps.block_diffusion_for_batch(loaded, config, IDS[:1]) is not first  # type: ignore[arg-type]
    assert first.preparation is steps.preparation
