"""A campaign for one short GPU lease: every shipped spec starts, plans are priced before they run,
LLaDA latency may be extrapolated from its first steps, and the GPU-side guards in the specs hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.actor import actor_count
from orchestrator.cli import EXIT_USAGE, main, sweep_command
from orchestrator.plan import plan_runs, predict_plan
from specs.loader import PACKAGE_ROOT, SpecError, load_spec
from specs.passages import eligible_spans
from specs.schema import RunConfig
from tests.spec_fixtures import mutated, spec_from, tiny_spec, write_spec
from workers.hardware import check_hardware
from workers.models.tokenization import synthetic_tokenizer
from workers.prompts import load_prompt_examples

SHIPPED = sorted((PACKAGE_ROOT / "specs").glob("*.yaml"))
CAMPAIGN = PACKAGE_ROOT / "specs" / "campaign-h100.yaml"
# The campaign took 1559 s on an H200 (results/h200, warm-ups and model loads included); the plan, with the host
# floor per eager forward, warm-ups and loads, predicts about 20 minutes. A lease of 30 minutes holds it.
LEASE_S = 30 * 60


# ---------------------------------------------------------------- every shipped spec starts


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_spec_plans_and_its_longest_prompts_can_be_cut(path: Path) -> None:
    """Item 1: synthetic-8b needed 512-2048 words per prompt and no shipped passage has that many, so every
    run errored after loading 16 GB. Each shipped spec now plans, and a local dataset yields the prompts
    of its longest grid point (cut with the BERT tokenizer the synthetic models use)."""
    spec = load_spec(path)
    planned = plan_runs(spec)
    assert planned
    if not spec.prompts.dataset.endswith((".txt", ".jsonl")):
        return  # a hub dataset (paper): read by `datasets` on the node, checked by `llada-bench download`
    longest = max(planned, key=lambda r: r.config.sequence_length).config
    examples = load_prompt_examples(
        spec.prompts, synthetic_tokenizer(), longest.prompt_length, longest.generation_length, longest.prompt_ids
    )
    assert len(examples) == spec.prompts.count
    assert all(len(e.prompt_ids) == longest.prompt_length for e in examples)
    assert all(len(e.reference_ids) == longest.generation_length for e in examples)


def test_joined_passages_are_consecutive_and_a_long_passage_stands_alone() -> None:
    passages = ["one two three", "four five", "six seven eight nine ten", "eleven"]
    assert list(eligible_spans(passages, 5, join=False)) == ["six seven eight nine ten"]
    assert list(eligible_spans(passages, 5, join=True)) == [
        "one two three\n\nfour five",
        "six seven eight nine ten",
    ]  # "eleven" never reaches 5 words: no span, never a made-up one


def test_too_few_long_passages_is_a_plan_error_that_names_the_fix() -> None:
    data = mutated(lambda d: d["grid"].update(prompt_lengths=[256], generation_lengths=[256], llada={"steps": [16], "block_lengths": [32]}))
    data.pop("quality")
    with pytest.raises(SpecError, match=r"prompts.count: .* only 0 passages of at least 512 words.*join_passages: true"):
        plan_runs(spec_from(data))
    data["prompts"]["join_passages"] = True
    assert plan_runs(spec_from(data))


def test_existing_sweeps_keep_their_run_ids() -> None:
    """New fields (prompts.join_passages, controls.extrapolation, timed_steps) enter the id only when set,
    so a sweep started before them resumes. The ids below were planned before those fields existed."""
    planned = {r.run_id for r in plan_runs(load_spec("specs/tiny.yaml"))}
    assert {"7ae981ded9bb", "fd40b73a138c", "9e320530365b"} <= planned


# ---------------------------------------------------------------- what a plan costs


def test_campaign_is_predicted_to_fit_one_short_lease(capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_spec(CAMPAIGN)
    estimate = predict_plan(spec, plan_runs(spec))
    assert estimate is not None and estimate.hardware == "h100-sxm"
    assert 60 < estimate.total_s < LEASE_S
    assert main(["plan", str(CAMPAIGN)]) == 0
    out = capsys.readouterr().out
    assert "predicted wall time on h100-sxm:" in out and "min" in out.splitlines()[-1]
    assert out.splitlines()[0].split()[-1] == "predicted"  # a column per run


def test_paper_plan_prints_its_predicted_hours(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "specs/paper.yaml"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("predicted wall time on a100-sxm4-80gb: ") and " h (" in last
    hours = float(last.split(": ")[1].split(" h")[0])
    assert 1 < hours < 100


def test_a_spec_without_a_profile_says_how_to_get_a_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "specs/tiny.yaml"]) == 0
    assert "set controls.hardware.profile" in capsys.readouterr().out.splitlines()[-1]


def test_sweep_refuses_a_plan_predicted_over_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = sweep_command(str(CAMPAIGN), out=tmp_path / "c", executor="inline", max_predicted_hours=0.05, report=False)
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--max-predicted-hours 0.05" in err and "h100-sxm" in err
    assert not (tmp_path / "c").exists()  # refused before anything was written
    spec = write_spec(tmp_path, tiny_spec(batch_sizes=[1]))
    assert sweep_command(str(spec), out=tmp_path / "t", executor="inline", max_predicted_hours=1.0) == EXIT_USAGE
    assert "names no roofline profile" in capsys.readouterr().err


# ---------------------------------------------------------------- extrapolation in the plan


def test_campaign_extrapolates_llada_and_checks_it_in_full() -> None:
    spec = load_spec(CAMPAIGN)
    extrapolation = spec.controls.extrapolation
    assert extrapolation is not None
    configs: list[RunConfig] = [r.config for r in plan_runs(spec)]
    llama = [c for c in configs if c.model.arch == "llama"]
    llada = [c for c in configs if c.model.arch == "llada"]
    assert llama and all(c.timed_steps is None for c in llama)
    assert {c.timed_steps for c in llada} == {None, extrapolation.timed_steps}
    extrapolated = {(c.batch_size, c.sequence_length, c.steps) for c in llada if c.timed_steps}
    full = {(c.batch_size, c.sequence_length, c.steps) for c in llada if c.timed_steps is None}
    lengths = {c.sequence_length for c in configs}
    steps = spec.grid.llada.steps
    assert extrapolated == {(b, n, s) for b in spec.grid.batch_sizes for n in lengths for s in steps}
    assert full == {(b, n, s) for b in extrapolation.check_batch_sizes for n in lengths for s in extrapolation.check_steps}


@pytest.mark.parametrize(
    ("controls", "message"),
    [
        ({"extrapolation": {"timed_steps": 4, "check_steps": [12]}}, r"check_steps: \[12\] are not diffusion step counts"),
        ({"extrapolation": {"timed_steps": 4, "check_batch_sizes": [3]}}, r"check_batch_sizes: \[3\] are not in grid"),
    ],
)
def test_extrapolation_settings_are_checked(controls: dict, message: str) -> None:
    data = tiny_spec()
    data["controls"].update(controls)
    with pytest.raises(SpecError, match=message):
        spec_from(data)
    data["quality"] = {"bertscore": {"model": "packaged-minilm", "num_layers": 6}}
    data["controls"]["extrapolation"] = {"timed_steps": 4}
    with pytest.raises(SpecError, match="controls.extrapolation: .*quality cannot be scored"):
        spec_from(data)


# ---------------------------------------------------------------- guards for the GPU


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("NVIDIA A100-SXM4-80GB", True),
        ("NVIDIA A100-SXM4-40GB", False),
        ("NVIDIA A100-PCIE-40GB", False),
        ("NVIDIA A100 80GB PCIe", False),
        ("NVIDIA H100 80GB HBM3", False),
    ],
)
def test_paper_spec_accepts_only_the_80gb_sxm4_a100(name: str, accepted: bool) -> None:
    requirement = load_spec("specs/paper.yaml").controls.hardware
    verdict = check_hardware(requirement.model_copy(update={"exclusive": False}), name, other_gpu_processes=False)
    assert (verdict.refusal is None) is accepted


def test_llada_remote_code_is_refused_at_spec_load_with_the_reason() -> None:
    data = tiny_spec()
    data["models"][1]["source"] = {"checkpoint": "GSAI-ML/LLaDA-8B-Base", "trust_remote_code": True}
    with pytest.raises(SpecError, match=r"models\.1\.source.*trust_remote_code: not supported for llada.*logits_to_keep"):
        spec_from(data)


def test_actors_are_capped_at_the_gpus() -> None:
    assert actor_count(None, 4) == (4, None)
    assert actor_count(2, 4) == (2, None)
    count, note = actor_count(8, 2)
    assert count == 2 and "--actors 8 exceeds the 2 GPU(s)" in note
    assert actor_count(3, 0) == (3, None)  # CPU actors share cores; nothing to wait for


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_more_actors_than_gpus_finishes_instead_of_hanging(tmp_path: Path) -> None:
    """Ray with one (declared) GPU: asking for 3 actors of one GPU each used to leave two pending forever."""
    import ray

    from orchestrator.cluster import capacity
    from orchestrator.driver import run_sweep
    from orchestrator.progress import Progress
    from orchestrator.store import ArtifactStore
    from tests import fake_actors
    from tests.fake_actors import FakeActor

    spec = spec_from(tiny_spec(batch_sizes=[1]))
    ray.cloudpickle.register_pickle_by_value(fake_actors)
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        store = ArtifactStore(tmp_path / spec.name)
        store.open(spec, yaml.safe_dump(tiny_spec(batch_sizes=[1])), force=True)
        planned = plan_runs(spec)
        summary = run_sweep(
            spec, planned, store, done=set(), actors=3, progress=Progress(len(planned)),
            connect_fn=capacity, actor_class=FakeActor,
        )  # fmt: skip
    finally:
        ray.shutdown()
    assert sorted(r.run_id for r in summary.results) == sorted(r.run_id for r in planned)
