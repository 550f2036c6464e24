"""A command deletes or overwrites only what its sweep's record says it wrote, and a folder is a sweep only when that
record is whole and its own: anything else is refused by name, with what to do, and left as it is. --force never
pools runs of two specs; a plan over its stated limit is refused before it is expanded; quality settings that
nothing would read are refused; an unreadable file is named by verify, never a traceback; and a sweep that stopped
early says in its report which planned runs never ran."""

from __future__ import annotations

import dataclasses
import errno
import os
import time
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.plan import plan_runs
from orchestrator.plan_size import MAX_PLANNED_RUNS, planned_count
from orchestrator.store import ArtifactStore
from report.cli import main as report_main
from report.document.render import render_report
from specs.artifacts import SweepLayout, read_sweep_record
from specs.loader import PACKAGE_ROOT, load_spec
from tests.spec_fixtures import tiny_spec, write_spec
from tests.sweep_faults import finished_sweep, small_spec

EXIT_USAGE = 2


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root and its bytes: what a refused command must leave as it was."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---------------------------------------------------------------- what counts as a sweep


def users_folder(root: Path, **extra: bytes) -> Path:
    root.mkdir(parents=True)
    for name, data in {"report.md": b"# my notes", "findings.json": b'{"mine": true}', **extra}.items():
        (root / name).write_bytes(data)
    return root


@pytest.mark.parametrize("link", ["an empty checksums.jsonl", "a checksums.jsonl of the user's",
                                  "another sweep's checksums.jsonl", "a sweep.lock of the user's",
                                  "a manifest.json without its record"])
def test_a_folder_whose_only_link_to_a_sweep_is_a_file_of_that_name_is_refused_and_untouched(
    link: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = small_spec(tmp_path)
    finished_sweep(spec, tmp_path / "other")
    files = {"an empty checksums.jsonl": {"checksums.jsonl": b""},
             "a checksums.jsonl of the user's": {"checksums.jsonl": b'{"file": "a.txt", "md5": "x"}\n'},
             "another sweep's checksums.jsonl": {"checksums.jsonl": (tmp_path / "other" / "checksums.jsonl").read_bytes()},
             "a sweep.lock of the user's": {"sweep.lock": b"locked by my own tool\n"},
             "a manifest.json without its record": {"manifest.json": (tmp_path / "other" / "manifest.json").read_bytes()}}
    home = users_folder(tmp_path / "home", **files[link])
    before = tree(home)
    assert main(["sweep", str(spec), "--out", str(home)]) == EXIT_USAGE
    assert f"--out {home}: " in one_line(capsys.readouterr().err)
    assert report_main([str(home)]) == EXIT_USAGE
    assert "the report is written only into a sweep's own directory" in one_line(capsys.readouterr().err)
    assert tree(home) == before


@pytest.mark.parametrize("command", [["verify"], ["report"]])
def test_verify_or_report_of_a_folder_that_is_no_sweep_is_one_line_naming_nothing_inside(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    run = report_main if command == ["report"] else lambda args: main(["verify", *args])
    for root in ("/", str(Path.home())):
        assert run([root]) == EXIT_USAGE
        line = one_line(capsys.readouterr().err)
        assert "holds no sweep" in line and "/bin" not in line and "symlink" not in line


# ---------------------------------------------------------------- what a command may replace


def test_a_run_file_the_record_never_wrote_is_never_run_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    planned = finished_sweep(spec, out, leave_out=1)
    theirs = SweepLayout(out).run_file(planned[-1].run_id)
    theirs.write_text('{"my": "own result"}')
    before = tree(out)
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == EXIT_USAGE
    line = one_line(capsys.readouterr().err)
    assert f"{theirs}: is not written by this sweep" in line and "move it out of" in line
    assert tree(out) == before


def test_the_report_never_writes_over_a_file_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from report_fixtures import SMOKE_LIKE, HardwareKind, write_sweep

    grid = dataclasses.replace(SMOKE_LIKE, batch_sizes=(1,), generation_lengths=(32,), steps=(8,), prompts=2,
                               hardware=(HardwareKind("cpu", "any", quality=False, measured_roofs=False),))
    out = write_sweep(tmp_path, grid)
    for theirs in (out / "report.md", out / "findings.json", out / "figures" / "throughput_by_batch.png"):
        theirs.parent.mkdir(exist_ok=True)
        theirs.write_bytes(b"mine")
        before = tree(out)
        assert report_main([str(out)]) == EXIT_USAGE
        line = one_line(capsys.readouterr().err)
        assert f"{theirs}: is not written by this sweep" in line and "move it out of" in line
        assert tree(out) == before
        theirs.unlink()


# ---------------------------------------------------------------- --force and another spec


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d["controls"].update(sessions=1), "controls.sessions 2 → 1"),
    (lambda d: d["controls"].update(repetitions=4), "controls.repetitions 3 → 4"),
])
def test_force_with_another_spec_never_pools_the_runs_of_two_specs(
    change, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_spec(batch_sizes=[1], generation_lengths=[32])
    data["controls"].update(sessions=2, repetitions=3)
    first = write_spec(tmp_path, data, "first.yaml")
    out = tmp_path / "out"
    finished_sweep(first, out)
    change(data)
    second = write_spec(tmp_path, data, "second.yaml")
    before = tree(out)
    for force in ([], ["--force"]):
        assert main(["sweep", str(second), "--out", str(out), "--no-report", *force]) == EXIT_USAGE
        line = one_line(capsys.readouterr().err)
        assert named in line
        assert ("would pool runs of two specs" in line) == bool(force)
    assert tree(out) == before


# ---------------------------------------------------------------- plans too large to expand


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d["controls"].update(sessions=10**23), "controls.sessions 100,000,000,000,000,000,000,000"),
    (lambda d: d["controls"].update(sessions=1_000_000), "controls.sessions 1,000,000"),
    (lambda d: (d.update(models=d["models"][:1]), d["grid"].pop("llada"),
                d["grid"].update(batch_sizes=list(range(1, 101)), generation_lengths=list(range(1, 101)),
                                 prompt_lengths=list(range(1, 101)))), "grid.batch_sizes 100 × lengths 10,000"),
    (lambda d: d["prompts"].update(dataset="Salesforce/wikitext", config="wikitext-103-raw-v1", count=10**12),
     "prompts.count: 1,000,000,000,000 prompts"),
])
def test_a_plan_over_the_limit_is_refused_at_once_naming_what_multiplies(
    edit, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_spec()
    data["quality"] = {}
    edit(data)
    spec = write_spec(tmp_path, data, "big.yaml")
    for command in (["plan", str(spec)], ["sweep", str(spec), "--out", str(tmp_path / "out")]):
        started = time.monotonic()
        assert main(command) == EXIT_USAGE
        assert time.monotonic() - started < 10
        line = one_line(capsys.readouterr().err)
        assert named in line
        assert "prompts.count" in line or f"over the limit of {MAX_PLANNED_RUNS:,}" in line
    assert not (tmp_path / "out").exists()


def test_the_count_before_expanding_is_the_plan_of_every_shipped_spec() -> None:
    for path in sorted((PACKAGE_ROOT / "specs").glob("*.yaml")):
        spec = load_spec(path)
        assert planned_count(spec) == len(plan_runs(spec)), path.name


@pytest.mark.parametrize(("quality", "named"), [
    ({"perplexity": {"evaluator": "llama-tiny"}, "batch_sizes": [1, 1]}, "quality.batch_sizes: 1 is listed twice"),
    ({"batch_sizes": [1]}, "quality.batch_sizes: given, but no quality metric is enabled"),
    ({"llama_sampled_temperature": 1.0}, "quality.llama_sampled_temperature: given, but no quality metric"),
])
def test_quality_settings_listed_twice_or_with_nothing_to_read_them_are_refused(
    quality: dict, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_spec()
    data["quality"] = quality
    assert main(["plan", str(write_spec(tmp_path, data, "q.yaml"))]) == EXIT_USAGE
    assert named in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------- unreadable files, and runs that never ran


@pytest.mark.parametrize("which", ["a run file", "spec.yaml", "checksums.jsonl"])
def test_verify_names_an_unreadable_file_rather_than_dying(
    which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    planned = finished_sweep(spec, out)
    victim = {"a run file": SweepLayout(out).run_file(planned[0].run_id), "spec.yaml": out / "spec.yaml",
              "checksums.jsonl": out / "checksums.jsonl"}[which]
    real_open = os.open

    def denied(path, flags, *args, **kwargs):  # as chmod 000 does for anyone but root
        if Path(path) == victim and not flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    assert main(["verify", str(out)]) == 1
    captured = capsys.readouterr()
    assert f"{victim}: unreadable (permission denied)" in captured.out and "Traceback" not in captured.err


def test_the_report_of_a_sweep_that_stopped_early_names_the_planned_runs_that_never_ran(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    planned = finished_sweep(spec, out, leave_out=2)
    md = render_report(out, echo=False).markdown.read_text(encoding="utf-8")
    [line] = [line for line in md.splitlines() if "never ran" in line]
    assert f"2 of the {len(planned)} planned runs never ran" in line
    assert planned[-1].run_id in line and planned[-2].run_id in line


def test_the_sweep_records_what_it_plans(tmp_path: Path) -> None:
    spec_path = small_spec(tmp_path)
    out = tmp_path / "out"
    spec = load_spec(spec_path)
    planned = [r.run_id for r in plan_runs(spec)]
    ArtifactStore(out).open(spec, spec_path.read_text(encoding="utf-8"), planned=planned[:1])  # a first, smaller plan
    assert read_sweep_record(SweepLayout(out)).plan == tuple(planned[:1])
    assert main(["sweep", str(spec_path), "--out", str(out), "--no-report", "--max-predicted-hours", "1e-9"]) == 2
    assert read_sweep_record(SweepLayout(out)).plan == tuple(planned[:1])  # refused before anything was written
    store = ArtifactStore(out)
    store.open(spec, spec_path.read_text(encoding="utf-8"))  # told no plan: the spec's own
    record = read_sweep_record(SweepLayout(out))
    assert record is not None and record.plan == tuple(planned) and spec.name in record.sweeps


def test_a_spec_amended_after_its_runs_is_frozen_again_and_recorded_without_rerunning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Words no run reads (description, departures, amendments) edited after the runs: the same sweep, its spec
    frozen again through the record, so verify passes and no run is redone."""
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    finished_sweep(spec, out)
    runs = {p.name: p.read_bytes() for p in (out / "runs").iterdir()}
    spec.write_text(spec.read_text() + "amendments:\n  - the description was rewritten after the runs\n")
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 0
    assert "nothing to run" in capsys.readouterr().out
    assert (out / "spec.yaml").read_text() == spec.read_text()
    assert {p.name: p.read_bytes() for p in (out / "runs").iterdir()} == runs
    assert main(["verify", str(out)]) == 0
