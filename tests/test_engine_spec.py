"""The engine axis in a spec: what may run in llama.cpp, refusals that name the field, ids that stay, and a missing
engine refused at plan time in one line that says how to build it. None of these needs the engine."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from orchestrator.cli import main
from orchestrator.plan import plan_runs, run_id_for
from specs.engines import LLAMA_CPP, PYTORCH, engine_missing
from specs.loader import SpecError, load_spec, parse_spec
from specs.paths import PACKAGE_ROOT
from specs.schema import LladaImpl, LlamaImpl

ENGINE_SPEC = PACKAGE_ROOT / "specs" / "engine.yaml"


def _engine_spec(**changes: object) -> dict:
    data = yaml.safe_load(ENGINE_SPEC.read_text())
    for path, value in changes.items():
        node = data
        *parents, last = path.split(".")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value
    return data


def _refusal(data: dict) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(yaml.safe_dump(data), source="engine.yaml")
    return str(caught.value)


def test_the_engine_spec_plans_both_sides_in_both_engines() -> None:
    planned = [p.config for p in plan_runs(load_spec(ENGINE_SPEC))]
    engines = {(c.model.arch, c.engine) for c in planned}
    assert engines == {("llama", PYTORCH), ("llama", LLAMA_CPP), ("llada", PYTORCH), ("llada", LLAMA_CPP)}
    assert {c.controls.sessions for c in planned} == {3}


def test_a_pytorch_variant_keeps_its_run_id() -> None:
    """`engine: pytorch` is the default and never part of a run's id, so existing sweeps keep their ids."""
    config = next(p.config for p in plan_runs(load_spec(ENGINE_SPEC)) if p.config.model.arch == "llada")
    named = config.model_copy(update={"llada_impl": LladaImpl(name="fast", threshold=0.9)})
    explicit = config.model_copy(update={"llada_impl": LladaImpl(name="fast", threshold=0.9, engine=PYTORCH)})
    assert run_id_for(named) == run_id_for(explicit)
    assert run_id_for(named) != run_id_for(named.model_copy(update={"llada_impl": LladaImpl(
        name="fast", threshold=0.9, engine=LLAMA_CPP)}))


@pytest.mark.parametrize(("impl", "message"), [
    (lambda: LlamaImpl(name="x", engine=LLAMA_CPP, compile=True), "compile is PyTorch's"),
    (lambda: LladaImpl(name="x", engine=LLAMA_CPP, cache="dual"), "drop cache and graph, or the engine"),
    (lambda: LladaImpl(name="vanilla", engine=LLAMA_CPP), "names the plain sampler"),
])
def test_what_llama_cpp_cannot_take_is_refused(impl: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        impl()


def test_a_synthetic_model_in_llama_cpp_is_refused_naming_it() -> None:
    data = _engine_spec(**{"models.0.source": {"synthetic": "tiny"}, "models.0.name": "llama-tiny"})
    assert "model 'llama-tiny' has synthetic weights; give it a checkpoint" in _refusal(data)


def test_a_family_llama_cpp_does_not_run_here_is_refused_naming_it() -> None:
    data = _engine_spec()
    data["models"].append({"name": "qwen-tiny", "arch": "qwen2", "source": {"synthetic": "tiny"}})
    assert "which does not run model 'qwen-tiny' (arch qwen2); llama.cpp runs: llama, llada" in _refusal(data)


def test_a_sampled_llama_cpp_decode_is_refused() -> None:
    assert "greedy loop, and controls.temperature is 0.7" in _refusal(_engine_spec(**{"controls.temperature": 0.7}))


def test_a_missing_engine_is_refused_at_plan_time_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    assert engine_missing(LLAMA_CPP) is not None and engine_missing(PYTORCH) is None
    assert main(["plan", str(ENGINE_SPEC)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the llama.cpp engine is not installed" in err[0] and "`just engine`" in err[0]


def test_a_wrong_engine_version_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1.0")
    problem = engine_missing(LLAMA_CPP)
    assert problem is not None and "llama_cpp_python 0.1.0, not the pinned" in problem


def test_the_engine_spec_is_documented_with_its_command() -> None:
    docs = (PACKAGE_ROOT / "docs" / "engine.md").read_text()
    assert "just engine" in docs and "specs/engine.yaml" in docs
    assert Path(PACKAGE_ROOT / "justfile").read_text().count("python -m workers.engine.build") == 1
