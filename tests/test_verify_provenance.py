"""`verify` names every stray entry and survives odd ones; an edited run file is never laundered into a result
by deleting the manifest, because every checksum written is also recorded in checksums.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.cli import main
from orchestrator.plan import plan_runs
from orchestrator.store import ArtifactStore
from specs.artifacts import SweepLayout, sha256_file, verify
from specs.loader import load_spec
from tests.sweep_faults import finished_sweep, small_spec


def sweep_dir(tmp_path: Path) -> tuple[Path, Path, list]:
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    return spec, out, finished_sweep(spec, out)


def test_verify_names_every_stray_and_survives_a_directory_run_path(tmp_path: Path, capsys) -> None:
    _, out, planned = sweep_dir(tmp_path)
    layout = SweepLayout(out)
    (out / "notes.txt").write_text("mine")
    (out / "old-results").mkdir()
    (out / "runs" / "README.md").write_text("x")
    (out / "runs" / "0123456789ab.json").mkdir()  # a directory where a run file would be
    (out / "figures").mkdir()
    (out / "figures" / "table.csv").write_text("x")
    listed = layout.run_file(planned[0].run_id)
    listed.unlink()
    listed.mkdir()  # a run the manifest lists, now a directory
    (out / "report.html.tmp").write_text("looks like a temporary, but no writer the record names made it")
    problems = {Path(p.path).relative_to(out).as_posix(): p.reason for p in verify(layout)}
    assert problems == {
        "notes.txt": "stray: not part of a sweep",
        "old-results": "stray: not part of a sweep",
        "runs/README.md": "stray: not a run file",
        "runs/0123456789ab.json": "stray: a run file must be a regular file",
        f"runs/{planned[0].run_id}.json": "stray: a run file must be a regular file",
        "figures/table.csv": "stray: not a figure",
        "report.html.tmp": "stray: not part of a sweep",
    }
    assert main(["verify", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "notes.txt: stray" in printed and f"{planned[0].run_id}.json: stray" in printed


def test_an_edited_run_is_not_adopted_when_the_manifest_is_deleted(tmp_path: Path, capsys) -> None:
    spec_path, out, planned = sweep_dir(tmp_path)
    layout = SweepLayout(out)
    edited = layout.run_file(planned[1].run_id)
    edited.write_text(edited.read_text().replace('"ok"', '"oom"'))
    layout.manifest.unlink()

    spec = load_spec(spec_path)
    store = ArtifactStore(out)
    store.open(spec, spec_path.read_text())
    ids = [r.run_id for r in planned]
    assert store.completed(ids) == set(ids) - {planned[1].run_id}  # recomputed, not adopted
    assert any(f"{edited}: not adopted" in note for note in store.notes)
    # verify keeps naming it until the run is recomputed (a resumed sweep does that)
    assert [str(p) for p in verify(layout)] == [f"{edited}: extra file not in the manifest"]
    assert main(["verify", str(out)]) == 1
    assert f"{edited}: extra file not in the manifest" in capsys.readouterr().out


def test_a_forged_manifest_entry_is_named(tmp_path: Path) -> None:
    _, out, planned = sweep_dir(tmp_path)
    layout = SweepLayout(out)
    edited = layout.run_file(planned[0].run_id)
    edited.write_text(edited.read_text().replace('"ok"', '"error"'))
    manifest = json.loads(layout.manifest.read_text())
    manifest["runs"][planned[0].run_id] = sha256_file(edited)  # the edit "blessed" in the manifest
    layout.manifest.write_text(json.dumps(manifest))
    assert [p.reason for p in verify(layout)] == ["checksum not in checksums.jsonl: not a result the sweep wrote"]


def test_without_any_record_the_sweep_refuses_rather_than_adopt(tmp_path: Path, capsys) -> None:
    spec, out, _ = sweep_dir(tmp_path)
    (out / "manifest.json").unlink()
    (out / "checksums.jsonl").unlink()
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 2
    assert "holds no sweep" in capsys.readouterr().err


def test_a_deleted_record_fails_verify_and_is_never_started_again_from_the_manifest(tmp_path: Path, capsys) -> None:
    """A run file and the manifest edited and the record deleted: verify fails, and a resume refuses rather than
    start a record from the manifest's word, which would launder the edit for good."""
    spec, out, planned = sweep_dir(tmp_path)
    edited = SweepLayout(out).run_file(planned[0].run_id)
    edited.write_text(edited.read_text().replace('"ok"', '"oom"'))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["runs"][planned[0].run_id] = sha256_file(edited)
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "checksums.jsonl").unlink()
    assert main(["verify", str(out)]) == 1
    assert f"{out / 'checksums.jsonl'}: missing: the record of every file this sweep wrote is gone" in capsys.readouterr().out
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == 2
    assert "holds no sweep whose record is whole" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert len(plan_runs(load_spec(spec))) == len(planned) == 3
