"""A sweep's record names one sweep: a linked line naming a second one fails `verify` (a forger who knows the
format can link it, but cannot make it belong), and a sweep or report of another name adds nothing to it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from orchestrator.cli import main
from report.document.outputs import ReportError, ReportWriter
from specs.artifacts import SweepLayout
from tests.sweep_faults import finished_sweep, small_spec


def linked_line(record: Path, entry: dict[str, object]) -> None:
    """Append a line carrying the right link (the sha256 of every byte before it), as specs/chain.py writes one."""
    data = record.read_bytes()
    line = json.dumps({**entry, "prev": hashlib.sha256(data).hexdigest()}, separators=(", ", ": "))
    record.write_bytes(data + line.encode() + b"\n")


def test_a_linked_line_naming_a_second_sweep_fails_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    finished_sweep(small_spec(tmp_path), out)
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()
    line = (out / "checksums.jsonl").read_bytes().count(b"\n") + 1
    linked_line(out / "checksums.jsonl", {"open": "sweep", "sweep": "other", "writer": "0123456789abcdef",
                                          "at": "2026-01-01T00:00:00+00:00"})
    assert main(["verify", str(out)]) == 1
    assert (f"checksums.jsonl: not whole: line {line} names sweep 'other', but the lines before it are sweep 'tiny''s, and "
            "a record names one sweep") in capsys.readouterr().out.replace(str(out) + "/", "")


def test_a_sweep_or_report_of_another_name_adds_nothing_to_the_record(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = small_spec(tmp_path), tmp_path / "out"
    finished_sweep(spec, out)
    record = (out / "checksums.jsonl").read_bytes()
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), "name": "renamed"}))
    assert main(["sweep", str(renamed), "--out", str(out), "--no-report", "--force"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is the record of sweep 'tiny', and a record names one sweep" in err
    with pytest.raises(ReportError, match="so nothing of sweep 'renamed' is added to it"):
        ReportWriter(SweepLayout(out), "renamed")
    assert (out / "checksums.jsonl").read_bytes() == record
