"""Every spec constraint fails with one line that names the field and what is allowed."""

from __future__ import annotations

import pytest

from specs.loader import SpecError, load_spec, parse_spec
from specs.registry import FAMILIES, preset_shape
from tests.spec_fixtures import mutated, spec_from, tiny_dict


def test_shipped_smoke_spec_is_valid() -> None:
    spec = load_spec()
    assert spec.name == "smoke"
    assert {m.arch for m in spec.models} == {"llama", "llada"}


CASES = [
    ("unknown top-level key", lambda d: d.update(colour="blue"), "test.yaml: colour: unknown key; allowed: name,"),
    ("unknown model key", lambda d: d["models"][0].update(sorce=1), "models.0.sorce: unknown key; allowed: name, arch, source"),
    ("unknown nested key", lambda d: d["controls"].update(hardware={"gpu": "A100", "exclusiv": True}),
     "controls.hardware.exclusiv: unknown key; allowed: gpu, exclusive, allow_mismatch"),
    ("bad arch", lambda d: d["models"][0].update(arch="gpt"), "models.0.arch: allowed: 'llama', 'llada', 'qwen2', 'dream' or 'fast_dllm_v2' (got 'gpt')"),
    ("bad preset", lambda d: d["models"][0]["source"].update(synthetic="huge"),
     "models.0.source.synthetic: allowed: 'tiny', 'small', '8b' or '7b' (got 'huge')"),
    ("source without a kind", lambda d: d["models"][0].update(source={"chekpoint": "a/b"}),
     "models.0.source: give either 'synthetic:"),
    ("explicit shape heads", lambda d: d["models"][0]["source"].update(synthetic={
        "hidden_size": 65, "num_layers": 1, "num_heads": 4, "num_kv_heads": 4, "intermediate_size": 8, "vocab_size": 10}),
     "models.0.source.synthetic.hidden_size: 65 is not divisible by num_heads 4"),
    ("steps not divisible by blocks", lambda d: d["grid"]["llada"].update(steps=[7]),
     "grid.llada.steps: 7 steps are not divisible by the 2 blocks of generation 64 / block 32; allowed: multiples of 2"),
    ("steps above generation", lambda d: d["grid"]["llada"].update(steps=[128]),
     "grid.llada.steps: 128 steps exceed generation length 32; allowed: at most 32"),
    ("generation not divisible by block", lambda d: d["grid"]["llada"].update(block_lengths=[24]),
     "grid.llada.block_lengths: generation length 32 is not divisible by block length 24; allowed: divisors of 32"),
    ("flash-attn on cpu", lambda d: d["controls"].update(attention="flash_attention_2"),
     "controls.attention: 'flash_attention_2' needs a CUDA device; allowed on cpu: 'sdpa', 'eager'"),
    ("flash-attn in fp32", lambda d: d["controls"].update(attention="flash_attention_2", device="cuda", dtype="float32"),
     "controls.attention: 'flash_attention_2' runs in bfloat16 or float16 only"),
    ("unknown dtype", lambda d: d["controls"].update(dtype="int8"), "controls.dtype: allowed: 'bfloat16', 'float16' or 'float32'"),
    ("llada steps for llama", lambda d: d["models"][0].update(llada={"steps": [8], "block_lengths": [32]}),
     "models.0.llada: llada sampler axes given for a llama model, which generates with the autoregressive sampler"),
    ("mask id for llama", lambda d: d["models"][0].update(mask_token_id=5), "models.0.mask_token_id: applies to diffusion models only; llama is autoregressive"),
    ("unsafe sweep name", lambda d: d.update(name="../etc"), "name: '../etc' is not a safe name"),
    ("unsafe model name", lambda d: d["models"][0].update(name="a/b"), "models.0.name: 'a/b' is not a safe name"),
    ("duplicate model names", lambda d: d["models"][1].update(name="llama-tiny"), "models: model names must be unique"),
    ("negative warmup", lambda d: d["controls"].update(warmup=-1), "controls.warmup: Input should be greater than or equal to 0"),
    ("zero repetitions", lambda d: d["controls"].update(repetitions=0), "controls.repetitions: Input should be greater than or equal to 1"),
    ("empty batch sizes", lambda d: d["grid"].update(batch_sizes=[]), "grid.batch_sizes: List should have at least 1 item"),
    ("both length forms", lambda d: d["grid"].update(sequence_lengths=[64], prompt_fraction=0.5),
     "grid.prompt_lengths: give either prompt_lengths + generation_lengths, or sequence_lengths + prompt_fraction"),
    ("too long for the model", lambda d: d["grid"].update(generation_lengths=[4096]),
     "exceed model 'llama-tiny''s max_position_embeddings 2048"),
    ("grid.llada without llada models", lambda d: d.update(models=[d["models"][0]]), "grid.llada: given but no model generates with the llada sampler"),
    ("llada without axes", lambda d: d["grid"].pop("llada"), "grid.llada: model 'llada-tiny' generates with the llada sampler but neither grid.llada"),
    ("evaluator unknown", lambda d: d["quality"]["perplexity"].update(evaluator="gpt9"),
     "quality.perplexity.evaluator: 'gpt9' is neither packaged-smollm2 (the packaged judge), an autoregressive model of "
     "this spec (llama-tiny)"),
    ("evaluator not causal", lambda d: d["quality"]["perplexity"].update(evaluator="llada-tiny"),
     "quality.perplexity.evaluator: 'llada-tiny' is a llada model"),
    ("missing prompt file", lambda d: d["prompts"].update(dataset="nope.txt"), "prompts.dataset: no such file 'nope.txt'"),
    ("missing checkpoint dir", lambda d: d["models"][0].update(source={"checkpoint": "./no/such/dir"}),
     "models.0.source.checkpoint: no such directory './no/such/dir'"),
    ("missing field", lambda d: d.pop("grid"), "grid: required field is missing"),
]


@pytest.mark.parametrize("mutate, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_spec_names_the_field(mutate, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from(mutated(mutate))
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_malformed_yaml_names_the_line() -> None:
    with pytest.raises(SpecError, match=r"x.yaml: malformed YAML at line 3, column"):
        parse_spec("name: a\nmodels: [\n  - {name: x\n  - y: ]\n", source="x.yaml")


def test_yaml_is_safe_loaded() -> None:
    with pytest.raises(SpecError, match="malformed YAML"):
        parse_spec("name: !!python/object/apply:os.system ['true']\n", source="x.yaml")


def test_non_mapping_spec() -> None:
    with pytest.raises(SpecError, match="a spec must be a mapping"):
        parse_spec("- 1\n- 2\n", source="x.yaml")


def test_sequence_lengths_split_by_fraction() -> None:
    def paired(d):
        d["grid"].pop("prompt_lengths")
        d["grid"].pop("generation_lengths")
        d["grid"].update(sequence_lengths=[64, 128], prompt_fraction=0.5)

    spec = spec_from(mutated(paired))
    assert [(p.prompt, p.generation) for p in spec.grid.length_pairs()] == [(32, 32), (64, 64)]


def test_spec_models_are_frozen() -> None:
    spec = spec_from(tiny_dict())
    with pytest.raises(Exception):
        spec.name = "other"  # type: ignore[misc]


def test_presets_cover_every_arch_and_size() -> None:
    for arch in ("llama", "llada"):
        assert set(FAMILIES[arch].presets) == {"tiny", "small", "8b"}
    for arch in ("qwen2", "dream", "fast_dllm_v2"):
        assert set(FAMILIES[arch].presets) == {"tiny", "small", "7b"}
    # The published 8B shapes: LLaMA-3-8B has GQA with 8 KV heads; LLaDA-8B is full MHA.
    assert preset_shape("llama", "8b").num_kv_heads == 8
    assert preset_shape("llada", "8b").num_kv_heads == 32
    assert round(preset_shape("llada", "8b").parameter_count() / 1e9, 2) == 8.02
    with pytest.raises(KeyError, match="allowed: tiny, small, 8b"):
        preset_shape("llama", "70b")


def test_evaluator_checkpoint_becomes_a_model() -> None:
    spec = spec_from(mutated(lambda d: d["quality"]["perplexity"].update(evaluator="meta-llama/Meta-Llama-3-8B")))
    evaluator = spec.evaluator_model()
    assert evaluator is not None and evaluator.arch == "llama"
    assert evaluator.source.checkpoint == "meta-llama/Meta-Llama-3-8B"


def test_unreadable_prompt_file(tmp_path) -> None:
    binary = tmp_path / "prompts.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(SpecError, match=r"prompts.dataset: cannot read .* as UTF-8 text"):
        spec_from(mutated(lambda d: d["prompts"].update(dataset=str(binary))))
