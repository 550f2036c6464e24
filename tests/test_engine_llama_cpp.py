"""llama.cpp as an engine, on the shipped miniature pair: the converted models' logits within 1e-4 of the package's
loaders (f32, flash attention off), and every run the engine spec plans gives the PyTorch engine's tokens.

These need the engine (`just engine`). Off CI they skip, saying how to build it; on CI (CI=true) a missing engine
fails them, so CI can never pass without running them.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from orchestrator.plan import plan_runs
from specs.engines import LLAMA_CPP, engine_missing
from specs.loader import load_spec
from specs.schema import Controls, LladaImpl, QualitySpec, RunConfig
from workers.models.loading import LoadedModel, load_model
from workers.models.tokenization import model_input_ids
from workers.prompts import load_prompt_examples, prompt_batches

ROOT = Path(__file__).resolve().parents[1]
ENGINE_SPEC = ROOT / "specs" / "engine.yaml"
LOGIT_TOLERANCE = 1e-4

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _engine() -> None:
    problem = engine_missing(LLAMA_CPP)
    if problem:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI runs the engine tests: {problem}")
        pytest.skip(problem)
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def loaded() -> dict[str, LoadedModel]:
    spec = load_spec(ENGINE_SPEC)
    controls = Controls(dtype="float32", device="cpu")
    return {m.arch: load_model(m, controls, torch.device("cpu")) for m in spec.models}


@pytest.fixture(scope="module")
def engines(loaded: dict[str, LoadedModel]) -> dict[str, object]:
    from workers.engine.llama_cpp_engine import LlamaCppEngine

    return {arch: LlamaCppEngine.open(model, "float32") for arch, model in loaded.items()}


def _prompt_batches(config: RunConfig, model: LoadedModel) -> list[torch.Tensor]:
    examples = load_prompt_examples(config.prompts, model.tokenizer, config.prompt_length, config.generation_length,
                                    config.prompt_ids)
    return [model_input_ids(model.tokenizer, [e.prompt_ids for e in batch], config.model.chat, torch.device("cpu"))
            for batch in prompt_batches(examples, config.batch_size)]


@pytest.mark.parametrize("arch", ["llama", "llada"])
def test_converted_logits_match_the_package_loaders(arch: str, loaded: dict, engines: dict) -> None:
    from workers.engine.llama_cpp_runtime import forward_logits

    model, engine = loaded[arch], engines[arch]
    x = torch.randint(5, model.tokenizer.vocab_size, (3, 48), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = model.model(x).logits.numpy()  # [B, L, V]
    if arch == "llada":
        ours = forward_logits(engine.gguf, x.numpy().astype(np.int32), np.arange(48))
    else:  # every position's logits from one causal decode of the three rows
        context = engine.gguf.context("autoregressive", 3, 48)
        context.clear()
        context.fill(x.numpy().reshape(-1).astype(np.int32), np.tile(np.arange(48, dtype=np.int32), 3),
                     np.repeat(np.arange(3, dtype=np.int32), 48), np.ones(3 * 48, dtype=np.int8))
        context.decode()
        ours = context.logits(3 * 48).reshape(3, 48, -1)
    assert ours.shape == reference.shape
    assert float(np.abs(ours - reference).max()) < LOGIT_TOLERANCE


def _engine_pairs() -> list[tuple[RunConfig, RunConfig]]:
    """Each llama.cpp run of the engine spec's first session with its PyTorch twin (same point, vanilla)."""
    planned = [p.config for p in plan_runs(load_spec(ENGINE_SPEC)) if p.config.session in (None, 0)]
    by_point = {(c.model.name, c.batch_size, c.steps): c for c in planned if c.engine != LLAMA_CPP}
    return [(by_point[(c.model.name, c.batch_size, c.steps)], c) for c in planned if c.engine == LLAMA_CPP]


@pytest.mark.parametrize("pair", _engine_pairs(), ids=lambda p: f"{p[1].model.arch}-B{p[1].batch_size}-K{p[1].steps}")
def test_every_engine_run_gives_the_pytorch_tokens(pair: tuple[RunConfig, RunConfig], loaded: dict,
                                                   engines: dict) -> None:
    """AR greedy at every batch size, LLaDA's rule loop at every step count and batch size the engine spec runs."""
    from workers.measure.scenario import generate_untimed

    torch_config, engine_config = pair
    model = loaded[engine_config.model.arch]
    for b, batch in enumerate(_prompt_batches(engine_config, model)):
        expected = generate_untimed(model, torch_config, batch, seed=b, temperature=0.0)
        got = generate_untimed(model, engine_config, batch, seed=b, temperature=0.0,
                               engine=engines[engine_config.model.arch])
        assert torch.equal(got, expected), f"batch {b}: rows differ: {(got != expected).any(1).nonzero().ravel().tolist()}"


def _default_sweep_llada_configs() -> list[RunConfig]:
    """The default sweep's vanilla LLaDA runs at B = 4, one per step count (its first session)."""
    planned = [p.config for p in plan_runs(load_spec(ROOT / "specs" / "smoke.yaml"))]
    return sorted({c.steps: c for c in planned if c.model.arch == "llada" and c.llada_impl is None
                   and c.batch_size == 4 and c.session in (None, 0)}.values(), key=lambda c: c.steps)


@pytest.mark.parametrize("config", _default_sweep_llada_configs(), ids=lambda c: f"K{c.steps}")
def test_llada_in_llama_cpp_gives_the_default_sweeps_tokens_at_every_step_count(config: RunConfig, loaded: dict,
                                                                               engines: dict) -> None:
    from workers.measure.scenario import generate_untimed

    engine_config = config.model_copy(update={"llada_impl": LladaImpl(name="llama.cpp", engine=LLAMA_CPP),
                                              "quality": QualitySpec(), "evaluator": None, "second_evaluator": None})
    model = loaded["llada"]
    for b, batch in enumerate(_prompt_batches(config, model)):
        expected = generate_untimed(model, config, batch, seed=b, temperature=0.0)
        got = generate_untimed(model, engine_config, batch, seed=b, temperature=0.0, engine=engines["llada"])
        assert torch.equal(got, expected), f"batch {b}: rows differ: {(got != expected).any(1).nonzero().ravel().tolist()}"
