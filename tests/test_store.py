"""Artifacts: atomic writes, checksums that catch tampering, resumption, and refusing another spec's dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.plan import plan_runs
from orchestrator.store import ArtifactStore, DifferentSpecError, atomic_write
from specs.artifacts import SweepLayout, verify
from specs.results import RunResult, RunStatus
from specs.safefile import WRITER_TOKEN
from tests.spec_fixtures import TINY, mutated, spec_from, tiny_dict


def fake_result(run, status: RunStatus = RunStatus.OK) -> RunResult:
    return RunResult(
        run_id=run.run_id, sweep="tiny", config=run.config, status=status, weights="synthetic",
        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00",
    )


@pytest.fixture
def opened(tmp_path: Path):
    spec = spec_from(tiny_dict())
    store = ArtifactStore(tmp_path / "smoke")
    store.open(spec, TINY.read_text())
    return spec, store, plan_runs(spec)


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "a.json"
    atomic_write(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_atomic_write_gives_ordinary_permissions(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic_write(target, b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_written_runs_verify_and_count_as_done(opened) -> None:
    _, store, planned = opened
    for run in planned[:3]:
        store.write_result(fake_result(run))
    assert verify(store.layout) == []
    assert store.completed([r.run_id for r in planned]) == {r.run_id for r in planned[:3]}


@pytest.mark.parametrize("damage, reason", [
    (lambda p: p.write_text(p.read_text()[:40]), "checksum mismatch (truncated or edited)"),
    (lambda p: p.write_text(p.read_text().replace('"ok"', '"error"')), "checksum mismatch (truncated or edited)"),
    (lambda p: p.unlink(), "missing"),
])
def test_verify_names_each_damaged_file(opened, damage, reason: str) -> None:
    _, store, planned = opened
    paths = [store.write_result(fake_result(run)) for run in planned[:2]]
    damage(paths[1])
    problems = verify(store.layout)
    assert [str(p) for p in problems] == [f"{paths[1]}: {reason}"]
    assert planned[1].run_id not in store.completed([r.run_id for r in planned])


def test_verify_catches_extra_files_and_edited_spec(opened) -> None:
    _, store, planned = opened
    path = store.write_result(fake_result(planned[0]))
    extra = path.with_name("0123456789ab.json")
    extra.write_text(path.read_text())
    store.layout.spec.write_text(store.layout.spec.read_text() + "\n# edited\n")
    reasons = {Path(p.path).name: p.reason for p in verify(store.layout)}
    assert reasons == {
        "0123456789ab.json": "extra file not in the manifest",
        "spec.yaml": "checksum mismatch (edited after the sweep)",
    }


def test_verify_command(opened, capsys) -> None:
    _, store, planned = opened
    path = store.write_result(fake_result(planned[0]))
    assert main(["verify", str(store.root)]) == 0
    assert "verified (1 runs" in capsys.readouterr().out
    path.write_text("{}")
    assert main(["verify", str(store.root)]) == 1
    assert f"{path}: checksum mismatch" in capsys.readouterr().out


def test_manifest_rebuilt_from_whole_run_files(opened) -> None:
    spec, store, planned = opened
    for run in planned[:2]:
        store.write_result(fake_result(run))
    store.layout.manifest.unlink()
    (store.layout.runs / "deadbeef0000.json").write_text('{"truncated": ')  # half a file: never adopted
    reopened = ArtifactStore(store.root)
    reopened.open(spec, TINY.read_text())
    assert reopened.completed([r.run_id for r in planned]) == {r.run_id for r in planned[:2]}
    assert set(json.loads(store.layout.manifest.read_text())["runs"]) == {r.run_id for r in planned[:2]}


def test_stale_temporaries_of_a_recorded_writer_removed_on_open_and_look_alikes_kept(opened) -> None:
    spec, store, _ = opened
    stale = store.layout.runs / f".abc.json.{WRITER_TOKEN}.x1y2.tmp"  # this process's: its writer is recorded
    look_alike = store.layout.runs / ".abc.json.0123456789abcdef.x1y2.tmp"  # no writer the record names
    for path in (stale, look_alike):
        path.write_text("half")
    ArtifactStore(store.root).open(spec, TINY.read_text())
    assert not stale.exists() and look_alike.read_text() == "half"


def test_retry_failed_reopens_error_runs(opened) -> None:
    _, store, planned = opened
    store.write_result(fake_result(planned[0], RunStatus.ERROR))
    store.write_result(fake_result(planned[1], RunStatus.OOM))
    ids = [r.run_id for r in planned]
    assert store.completed(ids) == {planned[0].run_id, planned[1].run_id}
    assert store.completed(ids, retry_failed=True) == {planned[1].run_id}


def test_other_spec_refused_unless_forced(opened) -> None:
    _, store, _ = opened
    other = spec_from(mutated(lambda d: d["controls"].update(seed=7)))
    with pytest.raises(DifferentSpecError, match=r"holds artifacts of a different spec \(controls.seed 0 → 7"):
        ArtifactStore(store.root).open(other, "name: smoke\n")
    ArtifactStore(store.root).open(other, "name: smoke\n# forced\n", force=True)  # no run yet: nothing to pool
    assert store.layout.spec.read_text() == "name: smoke\n# forced\n"


def test_same_spec_with_new_comments_is_not_another_spec(opened) -> None:
    spec, store, _ = opened
    ArtifactStore(store.root).open(spec, TINY.read_text() + "\n# a comment\n")
    assert verify(SweepLayout(store.root)) == []
