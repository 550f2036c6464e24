"""LLaDA's `graph` variant on a CPU: the step forwards over static buffers, compiled by inductor (a CPU has no
CUDA graphs; tests/gpu captures them), give the eager variant's tokens, generation after generation."""

from __future__ import annotations

from functools import cache

import pytest
import torch

from tests.sampler_models import MASK_ID, VOCAB_SIZE, left_padded_prompts, tiny_model
from workers.samplers import llada_generate, llada_steps
from workers.samplers.graphs import CapturedForward
from workers.samplers.llada.graphs import LladaGraphs

PROMPT_LENGTHS = [5, 8, 3]  # B=3, left-padded to 8
GEN = {"gen_length": 16, "block_length": 8, "steps": 4, "mask_id": MASK_ID}  # 2 blocks of 2 steps


@cache
def llada_model() -> torch.nn.Module:
    return tiny_model(bidirectional=True)


def _graphs(cache_mode: str, *, rows: int = 3) -> LladaGraphs:
    return LladaGraphs(llada_model(), rows=rows, length=8 + GEN["gen_length"], cache=cache_mode)


def _generate(cache_mode: str, *, padded: bool, graphs: LladaGraphs | None = None, **kw: object) -> torch.Tensor:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    return llada_generate(
        llada_model(), ids, mask if padded else None, cache=cache_mode, graphs=graphs,
        generator=torch.Generator().manual_seed(0), **GEN, **kw,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("cache_mode", "padded"), [("none", True), ("dual", True), ("prefix", False)])
def test_graph_variant_is_token_exact_with_eager_in_every_generation(cache_mode: str, padded: bool) -> None:
    """Two generations share one set of compiled forwards and one cache: both give the eager tokens, and the
    second compiles nothing (the dual cache's step has one shape for every block)."""
    eager = _generate(cache_mode, padded=padded)
    graphs = _graphs(cache_mode)
    assert torch.equal(_generate(cache_mode, padded=padded, graphs=graphs), eager)
    compiled, seconds = graphs.graphs, graphs.preparation.seconds
    assert seconds > 0
    assert torch.equal(_generate(cache_mode, padded=padded, graphs=graphs), eager)
    assert (graphs.graphs, graphs.preparation.seconds) == (compiled, seconds)
    expected = {"none": 1, "dual": 2, "prefix": 3}[cache_mode]  # prefix: a refresh and one step shape per block
    assert compiled == expected
    # One static logits output [rows, W, V] for every graph: the prefix cache's per-block shapes share it.
    assert len(graphs.outputs) == 1 and graphs.output_bytes == 3 * GEN["block_length"] * VOCAB_SIZE * 4


@pytest.mark.slow
def test_graph_variant_with_guidance_and_temperature_is_token_exact() -> None:
    """CFG doubles the rows each replayed forward feeds; Gumbel noise is drawn outside the graphs."""
    kw = {"cfg_scale": 1.5, "temperature": 0.9}
    eager = _generate("dual", padded=True, **kw)
    assert torch.equal(_generate("dual", padded=True, graphs=_graphs("dual", rows=6), **kw), eager)


@pytest.mark.slow
def test_graph_cached_forward_refreshed_every_step_is_vanilla() -> None:
    """The replayed cached forward, over a cache the replayed refresh has just filled, computes vanilla's
    logits: the proof that the graphs write the cache where the eager variant does."""
    vanilla = _generate("none", padded=True)
    assert torch.equal(_generate("dual", padded=True, graphs=_graphs("dual"), refresh_every_step=True), vanilla)


def test_graphs_refuse_another_shape() -> None:
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    with pytest.raises(ValueError, match="built for 2 rows"):
        llada_steps(llada_model(), ids, mask, graphs=_graphs("dual", rows=2), cache="dual", **GEN)
    with pytest.raises(ValueError, match="cache 'dual'"):
        llada_steps(llada_model(), ids, mask, graphs=_graphs("dual"), cache="prefix", **GEN)


def test_graph_sampler_reports_the_graphs_cache() -> None:
    """The sampler writes and reports the graphs' own cache (what the scenario checks was written)."""
    ids, mask = left_padded_prompts(PROMPT_LENGTHS)
    graphs = _graphs("dual")
    sampler = llada_steps(llada_model(), ids, mask, graphs=graphs, cache="dual", **GEN)
    assert sampler.kv_cache is graphs.cache


def test_captured_forward_copies_inputs_into_its_static_buffers() -> None:
    """Once captured, a signature's forward reads the static buffers: a call with new values gives the new
    result, and a new shape is a new capture."""
    calls: list[tuple[int, ...]] = []

    def double(x: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return x * 2

    forward = CapturedForward(double, torch.device("cpu"))
    assert torch.equal(forward(torch.tensor([1.0, 2.0])), torch.tensor([2.0, 4.0]))
    assert torch.equal(forward(torch.tensor([3.0, 5.0])), torch.tensor([6.0, 10.0]))
    assert forward.graphs == 1
    assert torch.equal(forward(torch.tensor([1.0])), torch.tensor([2.0]))
    assert forward.graphs == 2 and forward.preparation.seconds > 0


def test_signatures_with_one_output_shape_share_one_static_output() -> None:
    """A prefix cache's step has one input shape per block and one output shape: the replays write one buffer
    (518 MB at B = 64, W = 32, V = 126,464 in bf16), not one per block; another output shape gets its own."""
    forward = CapturedForward(lambda x: x[..., :2] * 2, torch.device("cpu"))
    first = forward(torch.ones(3, 4))
    second = forward(torch.ones(3, 5))  # another input shape, the same [3, 2] output
    assert forward.graphs == 2 and first.data_ptr() == second.data_ptr() and len(forward.outputs) == 1
    assert torch.equal(second, torch.full((3, 2), 2.0))
    forward(torch.ones(4, 4))
    assert len(forward.outputs) == 2
