"""The plan: grid expansion counts, stable ids, and the order runs are handed out in."""

from __future__ import annotations

import pytest

from orchestrator.cli import main
from orchestrator.plan import plan_runs, run_id_for
from specs.loader import load_spec
from specs.paths import PACKAGE_ROOT
from specs.registry import family, preset_shape
from specs.schema import ModelSpec
from tests.spec_fixtures import mutated, spec_from, tiny_dict


def test_llada_axes_never_multiply_llama_runs() -> None:
    spec = spec_from(mutated(lambda d: d["grid"]["llada"].update(remasking=["low_confidence", "random"], cfg_scales=[0, 1.5])))
    planned = plan_runs(spec)
    llama = [r for r in planned if r.config.model.arch == "llama"]
    llada = [r for r in planned if r.config.model.arch == "llada"]
    pairs, batches = 2, 2  # generation 32 and 64; batch 1 and 4
    assert len(llama) == pairs * batches
    assert len(llada) == pairs * batches * 3 * 1 * 2 * 2  # steps × blocks × remasking × cfg
    assert all(r.config.steps is None and r.config.block_length is None for r in llama)


def test_ids_are_stable_and_distinct() -> None:
    first = plan_runs(spec_from(tiny_dict()))
    second = plan_runs(spec_from(tiny_dict()))
    assert [r.run_id for r in first] == [r.run_id for r in second]
    assert len({r.run_id for r in first}) == len(first)
    assert all(len(r.run_id) == 12 for r in first)


def test_id_depends_on_config_not_on_spec_order() -> None:
    planned = {r.run_id for r in plan_runs(spec_from(tiny_dict()))}
    reordered = plan_runs(spec_from(mutated(lambda d: d["grid"].update(batch_sizes=[4, 1]))))
    assert {r.run_id for r in reordered} == planned
    changed = plan_runs(spec_from(mutated(lambda d: d["controls"].update(seed=1))))
    assert not planned & {r.run_id for r in changed}


def test_id_is_a_hash_of_the_config() -> None:
    run = plan_runs(spec_from(tiny_dict()))[0]
    assert run_id_for(run.config) == run.run_id
    assert run_id_for(run.config.model_copy(update={"batch_size": 2})) != run.run_id


def _point(run) -> tuple[int, int, int]:
    return (run.config.batch_size, run.config.prompt_length, run.config.generation_length)


def _blocks(planned) -> list[tuple[int, int, int]]:
    """The points in the order their runs come, one entry per contiguous block of runs."""
    points = [_point(r) for r in planned]
    return [p for i, p in enumerate(points) if i == 0 or points[i - 1] != p]


def test_the_models_are_interleaved_point_by_point_small_to_large() -> None:
    planned = plan_runs(spec_from(mutated(lambda d: d["grid"]["llada"].update(cfg_scales=[0, 1.0]))))
    blocks = _blocks(planned)
    assert len(blocks) == len(set(blocks)) == 4  # each point's runs side by side in time, every model's included
    assert [b * (p + g) for b, p, g in blocks] == sorted(b * (p + g) for b, p, g in blocks)
    for point in blocks:
        models = [r.config.model.name for r in planned if _point(r) == point]
        assert sorted(set(models)) == ["llada-tiny", "llama-tiny"]
    # The order inside a point is drawn, not the spec's: LLaMA is not always first, nor always last.
    firsts = {next(r.config.model.name for r in planned if _point(r) == p) for p in blocks}
    lasts = {[r.config.model.name for r in planned if _point(r) == p][-1] for p in blocks}
    assert firsts != {"llama-tiny"} or lasts != {"llada-tiny"}


def test_the_order_at_a_point_is_drawn_from_the_seed_and_stable() -> None:
    def order(data: dict) -> list[str]:
        return [r.run_id for r in plan_runs(spec_from(data))]

    first = order(tiny_dict())
    assert order(tiny_dict()) == first  # the same spec, the same order, in any process
    reversed_models = order(mutated(lambda d: d.update(models=d["models"][::-1])))
    assert reversed_models == first  # the spec's listing order does not choose it
    reseeded = plan_runs(spec_from(mutated(lambda d: d["controls"].update(seed=1))))
    by_seed = {seed: [(_point(r), r.config.model.name, r.config.steps) for r in runs] for seed, runs in
               ((0, plan_runs(spec_from(tiny_dict()))), (1, reseeded))}
    assert by_seed[0] != by_seed[1] and sorted(by_seed[0], key=str) == sorted(by_seed[1], key=str)


def _sessions(n: int, **controls) -> dict:
    return mutated(lambda d: d["controls"].update(sessions=n, **controls))


def test_sessions_repeat_the_whole_grid_one_after_the_other() -> None:
    one = plan_runs(spec_from(tiny_dict()))
    three = plan_runs(spec_from(_sessions(3)))
    assert len(three) == 3 * len(one)
    assert [r.config.session for r in three] == [s for s in range(3) for _ in one]
    assert all(r.config.session is None for r in one)
    assert len({r.run_id for r in three}) == len(three)  # the session is part of a run's identity
    # Each session is the interleaved grid again, in an order of its own.
    per_session = [[(_point(r), r.config.model.name, r.config.steps) for r in three if r.config.session == s]
                   for s in range(3)]
    assert all(sorted(order, key=str) == sorted(per_session[0], key=str) for order in per_session)
    assert len({tuple(order) for order in per_session}) > 1
    assert all(_blocks([r for r in three if r.config.session == s]) == _blocks(one) for s in range(3))


def test_quality_is_scored_in_the_first_session_only() -> None:
    three = plan_runs(spec_from(_sessions(3)))
    scored = [r.config for r in three if r.config.quality.enabled]
    assert {c.session for c in scored} == {0} and len(scored) == len(three) // 3
    assert all(r.config.evaluator is None and r.config.quality.perplexity is None for r in three if r.config.session)


def test_quality_batch_sizes_choose_the_scored_runs_and_change_no_id() -> None:
    """Quality is scored only at the named batch sizes; the field selects runs and enters no run's config or id."""
    every = plan_runs(spec_from(_sessions(2)))
    one = plan_runs(spec_from(mutated(lambda d: (d["controls"].update(sessions=2), d["quality"].update(batch_sizes=[4])))))
    scored = [r.config for r in one if r.config.quality.enabled]
    assert scored and {(c.batch_size, c.session) for c in scored} == {(4, 0)}
    assert all(c.quality.batch_sizes is None for c in scored)
    assert {r.run_id for r in one if r.config.quality.enabled} == {
        r.run_id for r in every if r.config.quality.enabled and r.config.batch_size == 4}
    assert all(r.config.evaluator is None for r in one if not r.config.quality.enabled)


def test_quality_batch_sizes_outside_the_grid_are_refused_naming_the_field() -> None:
    from specs.loader import SpecError

    with pytest.raises(SpecError, match=r"quality.batch_sizes: \[8\] are not in grid.batch_sizes"):
        spec_from(mutated(lambda d: d["quality"].update(batch_sizes=[8])))


def test_one_session_keeps_the_ids_a_sweep_had_before_sessions() -> None:
    """`sessions: 1` written out plans the runs a spec without it plans; more sessions never reuse those ids."""
    plain = {r.run_id for r in plan_runs(spec_from(tiny_dict()))}
    assert {r.run_id for r in plan_runs(spec_from(_sessions(1)))} == plain
    assert not plain & {r.run_id for r in plan_runs(spec_from(_sessions(2)))}


def test_a_session_must_fit_the_spec_sessions() -> None:
    from pydantic import ValidationError

    from specs.loader import SpecError
    from specs.schema import RunConfig

    with pytest.raises(SpecError, match="controls.sessions"):
        spec_from(_sessions(0))
    config = plan_runs(spec_from(_sessions(2)))[0].config
    for session in (None, 2):
        with pytest.raises(ValidationError, match="session: .* does not fit controls.sessions 2; allowed: 0 to 1"):
            RunConfig.model_validate({**config.model_dump(), "session": session})
    single = plan_runs(spec_from(tiny_dict()))[0].config
    with pytest.raises(ValidationError, match="allowed: none"):
        RunConfig.model_validate({**single.model_dump(), "session": 0})


def test_plan_command_shows_the_sessions(tmp_path, capsys) -> None:
    from tests.spec_fixtures import write_spec

    assert main(["plan", str(write_spec(tmp_path, _sessions(2)))]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[0].split()[:3] == ["run_id", "session", "model"]
    assert {line.split()[1] for line in lines[1:-2]} == {"0", "1"}
    assert lines[-2] == ("32 runs planned for sweep 'tiny': 2 sessions of 16 runs, each in fresh worker processes "
                         "(quality scored in session 0 only)")


def test_plan_command_prints_table_and_count(capsys) -> None:
    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:5] == ["run_id", "session", "model", "arch", "batch"]
    # the default spec: LLaMA vanilla at 3 batch sizes; LLaDA at 3 batch sizes x 5 step counts, and
    # its dual cache at 3 batch sizes x 1 step count; in 3 sessions
    lines = out.rstrip().splitlines()
    assert lines[-2] == ("72 runs planned for sweep 'smoke': 3 sessions of 24 runs, each in fresh worker processes "
                         "(quality scored in session 0 only)")
    assert lines[-1].startswith("predicted wall time: none")  # a CPU spec names no roofline profile


def test_plan_command_rejects_bad_spec_in_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels: []\ngrid: {batch_sizes: [1]}\n")
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {bad}: models: List should have at least 1 item")


def test_shipped_specs_validate_and_plan() -> None:
    from specs.loader import load_spec

    counts = {name: len(plan_runs(load_spec(f"specs/{name}.yaml")))
              for name in ("smoke", "tiny", "paper", "synthetic-8b", "block-ablation")}
    # paper: LLaMA 3 lengths × 3 batches; LLaDA × 5 step counts × 1 block length. smoke: LLaMA vanilla
    # × 3 batches; LLaDA 6 step counts (1-32) × 3 batches, and the dual cache at 4 steps × 3 batches; in 3 sessions.
    assert counts == {"smoke": 3 * (3 + 6 * 3 + 3), "tiny": 16, "paper": 9 + 45, "synthetic-8b": 9 + 45, "block-ablation": 2 + 12}


def test_planner_skips_runs_predicted_not_to_fit_when_asked() -> None:
    from orchestrator.plan import predicted_not_to_fit
    from specs.loader import load_spec

    spec = load_spec("specs/synthetic-8b.yaml")
    assert predicted_not_to_fit(spec, plan_runs(spec)) == {}  # not asked: the OOM wall is measured
    data = spec.model_dump(mode="json")
    data["controls"].update(skip_predicted_oom=True, hardware={"gpu": "any", "profile": "rtx-4090"})
    data["grid"]["batch_sizes"] = [1, 64]
    asked = spec_from(data)
    planned = plan_runs(asked)
    skipped = predicted_not_to_fit(asked, planned)
    # 24 GiB cannot hold LLaDA-8B at batch 64 × 2048 tokens, but holds LLaMA-8B at batch 1 × 512.
    by_id = {r.run_id: r.config for r in planned}
    assert any(by_id[i].model.arch == "llada" and by_id[i].batch_size == 64 for i in skipped)
    small = next(r for r in planned if r.config.model.arch == "llama" and r.config.batch_size == 1
                 and r.config.sequence_length == 512)
    assert small.run_id not in skipped
    assert all("exceeds rtx-4090's 24 GiB" in reason for reason in skipped.values())


def test_skip_predicted_oom_needs_a_profile() -> None:
    import pytest

    from specs.loader import SpecError

    with pytest.raises(SpecError, match="controls.hardware.profile: skip_predicted_oom needs a roofline hardware profile"):
        spec_from(mutated(lambda d: d["controls"].update(skip_predicted_oom=True)))


# ---------------------------------------------------------------- implementation variants

LLADA_IMPLS = [
    {"name": "vanilla"},
    {"name": "dual-cache", "cache": "dual"},
    {"name": "threshold-0.9", "threshold": 0.9},
    {"name": "same-as-vanilla"},  # named, nothing accelerated: extrapolated like vanilla
]


def _with_impls(d: dict) -> None:
    d["grid"]["llada"]["impl"] = LLADA_IMPLS
    d["grid"]["llama"] = {"impl": [{"name": "vanilla"}, {"name": "static-compile", "compile": True}]}


def test_variants_multiply_only_their_own_architecture_and_keep_vanilla_ids() -> None:
    vanilla = plan_runs(spec_from(tiny_dict()))
    planned = plan_runs(spec_from(mutated(_with_impls)))
    llama = [r for r in planned if r.config.model.arch == "llama"]
    llada = [r for r in planned if r.config.model.arch == "llada"]
    assert len(llama) == 2 * 4 and len(llada) == 4 * 2 * 2 * 3  # impls x (pairs x batches [x steps])
    plain = [r for r in planned if r.config.llada_impl is None and r.config.llama_impl is None]
    assert {r.run_id for r in plain} == {r.run_id for r in vanilla}  # vanilla keeps the ids it had
    assert {r.config.impl_name for r in llada} == {i["name"] for i in LLADA_IMPLS}
    assert {r.config.impl_name for r in llama} == {"vanilla", "static-compile"}
    assert all(r.config.llama_impl.compile for r in llama if r.config.llama_impl is not None)
    assert len({r.run_id for r in planned}) == len(planned)


def test_per_model_llada_axes_carry_their_own_impls() -> None:
    def per_model(d: dict) -> None:
        d["models"][1]["llada"] = {"steps": [8], "block_lengths": [32], "impl": [{"name": "prefix-cache", "cache": "prefix"}]}

    llada = [r for r in plan_runs(spec_from(mutated(per_model))) if r.config.model.arch == "llada"]
    assert llada and all(r.config.impl_name == "prefix-cache" and r.config.llada_impl.cache == "prefix" for r in llada)


def test_a_variant_runs_only_at_the_steps_it_names_with_the_id_it_has_everywhere() -> None:
    def at_four(d: dict) -> None:
        d["grid"]["llada"]["impl"] = [{"name": "vanilla"}, {"name": "dual-cache", "cache": "dual", "steps": [16]}]

    def everywhere(d: dict) -> None:
        d["grid"]["llada"]["impl"] = [{"name": "vanilla"}, {"name": "dual-cache", "cache": "dual"}]

    limited = [r for r in plan_runs(spec_from(mutated(at_four))) if r.config.impl_name == "dual-cache"]
    full = {r.run_id for r in plan_runs(spec_from(mutated(everywhere))) if r.config.impl_name == "dual-cache"}
    assert limited and {r.config.steps for r in limited} == {16}
    assert all(r.config.llada_impl.steps is None for r in limited)  # where it runs is not part of the run
    assert {r.run_id for r in limited} < full  # the same runs as the unrestricted variant's at 16 steps


def test_extrapolation_skips_variants_whose_steps_differ() -> None:
    def extrapolated(d: dict) -> None:
        _with_impls(d)
        d.pop("quality")
        d["controls"]["extrapolation"] = {"timed_steps": 4, "check_steps": [16]}

    llada = [r.config for r in plan_runs(spec_from(mutated(extrapolated))) if r.config.model.arch == "llada"]
    for name in ("dual-cache", "threshold-0.9"):
        assert all(c.timed_steps is None for c in llada if c.impl_name == name)
    for name in ("vanilla", "same-as-vanilla"):
        assert any(c.timed_steps == 4 for c in llada if c.impl_name == name)


def test_bad_variants_name_the_field(tmp_path, capsys) -> None:
    import pytest

    from specs.loader import SpecError

    cases = [
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "vanilla", "cache": "dual"}]), "name: 'vanilla' names"),
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "a", "cache": "full"}]), "cache"),
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "a", "threshold": 1.5}]), "threshold"),
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "a", "threshold": 0.9, "factor": 1}]), "factor"),
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "a"}, {"name": "a", "cache": "dual"}]), "impl"),
        (
            lambda d: d["grid"]["llada"].update(impl=[{"name": "t", "threshold": 0.9}], remasking=["random"]),
            "impl: 't' commit by the model's confidence",
        ),
        (lambda d: d["grid"].update(llama={"impl": [{"name": "c", "compiled": True}]}), "compiled"),
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "d", "cache": "dual", "steps": [5]}]),
         r"impl: 'd' steps \[5\] are not among the steps swept; allowed: 8, 16, 32"),
        (lambda d: d["grid"]["llada"].update(impl=[{"name": "d", "cache": "dual", "steps": [8, 8]}]), "listed twice"),
    ]
    for mutate, message in cases:
        with pytest.raises(SpecError, match=message):
            spec_from(mutated(mutate))

    def no_llama(d: dict) -> None:
        d["models"] = [d["models"][1]]
        d["grid"]["llama"] = {"impl": [{"name": "c", "compile": True}]}
        d["quality"].pop("perplexity")

    with pytest.raises(SpecError, match="grid.llama: given but no model generates with the autoregressive sampler"):
        spec_from(mutated(no_llama))


def test_run_config_stores_vanilla_as_none_and_checks_the_arch() -> None:
    import pytest
    from pydantic import ValidationError

    from specs.schema import RunConfig

    llama = next(r.config for r in plan_runs(spec_from(tiny_dict())) if r.config.model.arch == "llama")
    explicit = RunConfig.model_validate({**llama.model_dump(), "llama_impl": {"name": "vanilla"}})
    assert explicit.llama_impl is None and run_id_for(explicit) == run_id_for(llama)
    with pytest.raises(ValidationError, match="llada_impl: applies to models of the llada sampler only"):
        RunConfig.model_validate({**llama.model_dump(), "llada_impl": {"name": "d", "cache": "dual"}})


@pytest.mark.parametrize("sweep", ["campaign-h100", "accel-8b"])
def test_sweeps_run_by_an_earlier_version_keep_their_run_ids_and_resume(sweep: str) -> None:
    """The H200 sweeps (results/h200, written at 966dbce, before the graph and decode-attention options
    existed) plan to exactly the run ids of their artifacts: a field added later enters the id only when set."""
    root = PACKAGE_ROOT / "results" / "h200" / sweep
    planned = {run.run_id for run in plan_runs(load_spec(root / "spec.yaml"))}
    assert planned == {path.stem for path in (root / "runs").glob("*.json")}


def test_the_options_added_later_still_separate_runs_when_set() -> None:
    (run,) = [r for r in plan_runs(load_spec(PACKAGE_ROOT / "results" / "h200" / "accel-8b" / "spec.yaml"))
              if r.config.llada_impl is not None and r.config.llada_impl.cache == "dual" and r.config.batch_size == 1]
    graph = run.config.model_copy(update={"llada_impl": run.config.llada_impl.model_copy(update={"graph": True})})
    assert run_id_for(graph) != run.run_id
    (llama,) = [r for r in plan_runs(load_spec(PACKAGE_ROOT / "results" / "h200" / "accel-8b" / "spec.yaml"))
                if r.config.llama_impl is not None and r.config.batch_size == 1]
    live = llama.config.model_copy(
        update={"llama_impl": llama.config.llama_impl.model_copy(update={"decode_attention": "live"})}
    )
    assert run_id_for(live) != llama.run_id


def test_naming_the_sampler_or_a_default_shape_field_changes_no_run_id() -> None:
    """The registry's fields enter the id only when they say something: a spec that names its models'
    samplers, or writes an explicit shape without a QKV bias, plans the same runs as before they existed."""
    spec = load_spec(PACKAGE_ROOT / "results" / "h200" / "accel-8b" / "spec.yaml")
    run = next(r for r in plan_runs(spec) if r.config.model.arch == "llama" and r.config.llama_impl is None
               and r.config.batch_size == 1 and r.config.sequence_length == 768)
    sampler = family(run.config.model.arch).sampler
    named = run.config.model_copy(update={"model": run.config.model.model_copy(update={"sampler": sampler})})
    assert run_id_for(named) == run.run_id
    explicit = ModelSpec(name="m", arch="llama", source={"synthetic": preset_shape("llama", "tiny").model_dump()})
    config = run.config.model_copy(update={"model": explicit, "steps": None, "block_length": None, "remasking": None,
                                           "cfg_scale": 0.0, "llada_impl": None, "llama_impl": None})
    # The id this config had at 1eb8a13, before ModelShape.attention_bias existed.
    assert (run.run_id, run_id_for(config)) == ("a286390f05fa", "70a449e6d269")
    dream = ModelSpec(name="m", arch="dream", source={"synthetic": preset_shape("dream", "tiny").model_dump()})
    assert run_id_for(config.model_copy(update={"model": dream})) != run_id_for(config)
