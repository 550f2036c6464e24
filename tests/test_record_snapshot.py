"""The record is never written in place into an inode another name shares: a `cp -al` snapshot of a sweep still
verifies after the original is swept again, and a sweep refused for a changed spec leaves its folder as it was."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from orchestrator.plan import plan_runs
from orchestrator.store import ArtifactStore, DifferentSpecError
from specs.artifacts import SweepLayout, verify
from specs.safefile import append_line
from tests.spec_fixtures import TINY, mutated, spec_from, tiny_dict
from tests.test_store import fake_result


def _snapshot(source: Path, target: Path) -> None:
    """`cp -al`: the same tree, every file a hard link to the original's."""
    shutil.copytree(source, target, copy_function=os.link)


def _contents(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _another_process(monkeypatch) -> None:
    """A later command: its own writer token, so opening the record appends an `open` line naming it."""
    monkeypatch.setattr("specs.chain.WRITER_TOKEN", "f" * 16)


def test_an_append_leaves_the_other_hard_links_file_as_it_was(tmp_path: Path) -> None:
    record, linked = tmp_path / "checksums.jsonl", tmp_path / "snapshot.jsonl"
    record.write_text("one\n")
    os.link(record, linked)
    append_line(record, "two")
    assert record.read_text() == "one\ntwo\n" and linked.read_text() == "one\n"
    assert os.stat(record).st_nlink == 1 and os.stat(linked).st_nlink == 1


def test_a_hard_linked_snapshot_still_verifies_after_the_original_is_swept_again(tmp_path: Path, monkeypatch) -> None:
    spec = spec_from(tiny_dict())
    store = ArtifactStore(tmp_path / "sweep")
    store.open(spec, TINY.read_text())
    planned = plan_runs(spec)
    for run in planned[:2]:
        store.write_result(fake_result(run))
    _snapshot(store.root, tmp_path / "backup")
    before = _contents(tmp_path / "backup")
    assert verify(SweepLayout(tmp_path / "backup")) == []
    _another_process(monkeypatch)
    again = ArtifactStore(store.root)  # `sweep --force`: the same runs written again, the record appended to
    again.open(spec, TINY.read_text(), force=True)
    for run in planned:
        again.write_result(fake_result(run))
    assert _contents(tmp_path / "backup") == before
    assert verify(SweepLayout(tmp_path / "backup")) == []
    assert verify(again.layout) == []


def test_a_sweep_refused_for_a_changed_spec_leaves_the_folder_byte_identical(tmp_path: Path, monkeypatch) -> None:
    spec = spec_from(tiny_dict())
    store = ArtifactStore(tmp_path / "sweep")
    store.open(spec, TINY.read_text())
    store.write_result(fake_result(plan_runs(spec)[0]))
    before = _contents(store.root)
    _another_process(monkeypatch)
    other = spec_from(mutated(lambda d: d["controls"].update(seed=7)))
    with pytest.raises(DifferentSpecError, match="different spec"):
        ArtifactStore(store.root).open(other, "name: smoke\n")
    assert _contents(store.root) == before
