"""`verify` covers the files people read: each file the report wrote is checked against the checksum recorded in
the sweep's chained record, an edit to any of them is named (only that file, whatever report-manifest.json is made
to say), a deleted record or report file fails, rendering again rewrites them and their record, and a folder whose
record predates the chain (the committed H200 sweeps) still verifies, naming each file it cannot check."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from orchestrator.cli import main
from report.document.render import render_report
from specs.artifacts import SweepLayout, sha256_file
from specs.loader import PACKAGE_ROOT
from specs.report_record import report_outputs

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H200 accelerated-variants sweep (10 runs), unpacked and rendered by this version."""
    into = tmp_path_factory.mktemp("rendered")
    with tarfile.open(PACKAGE_ROOT / "tests" / "data" / "h200" / "accel-8b.tgz") as archive:
        archive.extractall(into, filter="data")
    render_report(into / "accel-8b", echo=False)
    return into / "accel-8b"


@pytest.fixture
def sweep(rendered: Path, tmp_path: Path) -> Path:
    """A copy of the rendered sweep, to damage."""
    return Path(shutil.copytree(rendered, tmp_path / "accel-8b"))


def verify(root: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str, str]:
    code = main(["verify", str(root), *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def edit_verdict(path: Path) -> None:
    findings = json.loads(path.read_text())
    findings["verdict"] = ["LLaDA is faster everywhere."]
    path.write_text(json.dumps(findings))


def halve_latencies(path: Path) -> None:
    table = pl.read_parquet(path)
    table.with_columns(pl.col("latency_e2e_s_median") / 2).write_parquet(path)


EDITS = {
    "findings.json": edit_verdict,
    "report.md": lambda p: p.write_text(p.read_text().replace("LLaDA", "LLaMA")),
    "report.html": lambda p: p.write_text(p.read_text() + "<p>added</p>"),
    "results.parquet": halve_latencies,
    "figures/roofline.svg": lambda p: p.write_text(p.read_text().replace("<svg", "<svg data-edited='1'", 1)),
}


def test_an_edit_to_any_file_the_report_wrote_is_named_until_the_report_is_rendered_again(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = len(report_outputs(SweepLayout(sweep)))
    code, out, _ = verify(sweep, capsys)
    assert code == 0 and f"the report's {outputs} files match)" in out
    for name, edit in EDITS.items():
        edit(sweep / name)
    code, out, _ = verify(sweep, capsys)
    assert code == 1
    for name in EDITS:
        assert f"{sweep / name}: checksum mismatch: edited after the report wrote it" in out, name
    render_report(sweep, echo=False)  # the report's own outputs never stop it: it rewrites them and their record
    code, out, _ = verify(sweep, capsys)
    assert code == 0 and f"the report's {outputs} files match)" in out


def as_rendered_by_an_older_version(sweep: Path) -> Path:
    """The sweep's record as an older version left it: the unlinked lines of the archive, none for the report."""
    with tarfile.open(PACKAGE_ROOT / "tests" / "data" / "h200" / "accel-8b.tgz") as archive:
        record = archive.extractfile("accel-8b/checksums.jsonl")
        assert record is not None
        (sweep / "checksums.jsonl").write_bytes(record.read())
    return sweep


def test_a_folder_rendered_before_the_record_verifies_and_names_every_file_it_cannot_check(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    as_rendered_by_an_older_version(sweep)
    (sweep / "report-manifest.json").unlink()
    code, out, err = verify(sweep, capsys)
    assert code == 0
    for path in report_outputs(SweepLayout(sweep)):
        assert f"{path}: not covered (no checksum recorded)" in out
    assert "the report recorded no checksums (rendered by an earlier version, or interrupted)" in err
    assert f"`llada-bench report {sweep}` renders it again and records them" in err


COMMITTED = sorted(p.parent.relative_to(PACKAGE_ROOT / "results")
                   for p in (PACKAGE_ROOT / "results").glob("*/*/checksums.jsonl"))


@pytest.mark.parametrize("name", COMMITTED, ids=str)
def test_every_committed_sweep_verifies_with_every_report_file_covered(
    name: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """results/h200/* and results/cpu/engine, as a clone holds them and as the README says to verify them."""
    assert {"h200/accel-8b", "h200/campaign-h100", "cpu/engine"} <= {str(n) for n in COMMITTED}
    root = as_committed(PACKAGE_ROOT / "results" / name, tmp_path)
    code, out, _ = verify(root, capsys)  # as the README says to verify it: results.parquet and report.html left out
    assert code == 0, out
    written = len(report_outputs(SweepLayout(root)))
    assert f"the report's {written} files match" in out, out
    assert "not covered" not in out


def as_committed(folder: Path, tmp_path: Path) -> Path:
    """A copy of `folder` without what .gitignore keeps out of git (results/*/*/<name>): what a clone holds."""
    ignored = [line.rsplit("/", 1)[1] for line in (PACKAGE_ROOT / ".gitignore").read_text().splitlines()
               if line.startswith("/results/*/*/")]  # fmt: skip
    assert ignored == ["results.parquet", "report.html"]
    return Path(shutil.copytree(folder, tmp_path / folder.name, ignore=shutil.ignore_patterns(*ignored)))


def test_leave_out_records_the_removal_so_the_folder_verifies_without_them(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["leave-out", str(sweep)]) == 0
    assert not (sweep / "report.html").exists() and not (sweep / "results.parquet").exists()
    code, out, err = verify(sweep, capsys)
    assert code == 0 and "warning" not in err, out + err
    assert main(["leave-out", str(sweep)]) == 0 and "nothing to leave out" in capsys.readouterr().out
    render_report(sweep, echo=False)  # rendered again: the record says they are there, and they verify
    assert verify(sweep, capsys)[0] == 0 and (sweep / "report.html").is_file()
    (sweep / "report.html").write_text("<p>mine</p>")  # an edited one is refused by name and kept
    assert main(["leave-out", str(sweep)]) == 2
    assert "report.html: not as the report wrote it" in capsys.readouterr().err
    assert (sweep / "report.html").read_text() == "<p>mine</p>" and (sweep / "results.parquet").is_file()


def test_what_the_report_did_not_write_is_named_and_a_gone_file_fails_unless_allowed(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (sweep / "report.html").unlink()  # left out on purpose, as the committed H200 folders leave it out
    code, out, _ = verify(sweep, capsys)
    assert code == 1 and f"{sweep / 'report.html'}: missing: the report wrote it" in out
    code, _, err = verify(sweep, capsys, "--allow-missing-report")
    assert code == 0 and f"the report wrote are gone: {sweep / 'report.html'}" in err
    (sweep / "figures" / "mine.png").write_bytes(b"\x89PNG my own figure")
    code, out, _ = verify(sweep, capsys, "--allow-missing-report")
    assert code == 1 and f"{sweep / 'figures' / 'mine.png'}: not written by the report" in out


def test_a_record_naming_a_file_the_report_never_writes_is_named_and_that_file_never_read(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for older in (False, True):
        if older:
            as_rendered_by_an_older_version(sweep)
        record_path = sweep / "report-manifest.json"
        record = json.loads(record_path.read_text())
        record["files"]["../elsewhere.txt"] = "0" * 64
        record["files"]["spec.yaml"] = "0" * 64
        record_path.write_text(json.dumps(record))
        code, out, _ = verify(sweep, capsys)
        assert code == 1
        if older:  # report-manifest.json is all there is: what it names is checked, never read outside the folder
            assert f"{sweep / '../elsewhere.txt'}: named by report-manifest.json, but no report writes it" in out
            assert f"{sweep / 'spec.yaml'}: named by report-manifest.json, but no report writes it" in out
        else:  # the record is the truth: the edited report-manifest.json is named, and nothing it says is read
            assert f"{record_path}: checksum mismatch: edited after the report wrote it" in out
            assert "elsewhere.txt" not in out


def test_a_report_rendered_before_the_runs_changed_is_said_to_be_behind(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = sweep / "manifest.json"
    data = json.loads(manifest.read_text())
    dropped = sorted(data["runs"])[0]
    (sweep / "runs" / f"{dropped}.json").unlink()
    del data["runs"][dropped]
    manifest.write_text(json.dumps(data))  # as a run recomputed after the report would change it
    code, _, err = verify(sweep, capsys)
    assert code == 0
    assert "the report was rendered before the runs last changed, so it does not show them all" in err


@pytest.mark.slow
def test_an_interrupted_report_leaves_files_recorded_never_called_edited(
    sweep: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from specs import chain

    written: list[Path] = []
    atomic_write = chain.atomic_write

    def interrupted(path: Path, data: bytes) -> None:
        if len(written) == 3:  # after results.parquet, report.html and report.md
            raise KeyboardInterrupt
        written.append(path)
        atomic_write(path, data)

    monkeypatch.setattr(chain, "atomic_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        render_report(sweep, echo=False)
    monkeypatch.undo()
    code, out, err = verify(sweep, capsys)
    assert code == 0 and "checksum mismatch" not in out, out
    assert "the last report was interrupted before it recorded report-manifest.json" in err
    render_report(sweep, echo=False)
    code, _, err = verify(sweep, capsys)
    assert code == 0 and "interrupted" not in err


# ---------------------------------------------------------------- a forger who rewrites files and records


def bless(sweep: Path, name: str) -> None:
    """Write a file's new sha256 into report-manifest.json, as a forger covering an edit would."""
    record = json.loads((sweep / "report-manifest.json").read_text())
    record["files"][name] = sha256_file(sweep / name)
    (sweep / "report-manifest.json").write_text(json.dumps(record, indent=1))


def forge_the_record(sweep: Path, edit: Callable[[list[str]], list[str]]) -> None:
    path = sweep / "checksums.jsonl"
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")


def relinked(lines: list[str]) -> list[str]:
    """Every link recomputed, as a forger who knows the format can: only a head kept elsewhere tells."""
    out, before = [], b""
    for line in lines:
        entry = json.loads(line)
        if "prev" in entry:
            entry["prev"] = hashlib.sha256(before).hexdigest()
            line = json.dumps(entry, separators=(", ", ": "))
        out.append(line)
        before += (line + "\n").encode()
    return out


def edit_line(lines: list[str], key: str, sha: str) -> list[str]:
    return [json.dumps({**json.loads(x), "sha256": sha}) if json.loads(x).get("file") == key else x for x in lines]


RESULTS = '"file": "results.parquet"'  # the report's first file in the record
FORGERIES: dict[str, tuple[Callable[[Path], None], list[str], list[str]]] = {
    # name: (forgery, files named with a problem, files that must not be named)
    "findings edited, its hash blessed in report-manifest.json": (
        lambda s: (edit_verdict(s / "findings.json"), bless(s, "findings.json")),
        ["findings.json", "report-manifest.json"], ["figures/roofline.png"]),
    "findings edited, report-manifest.json deleted": (
        lambda s: (edit_verdict(s / "findings.json"), (s / "report-manifest.json").unlink()),
        ["findings.json", "report-manifest.json"], []),
    "findings deleted": (lambda s: (s / "findings.json").unlink(), ["findings.json"], []),
    "one hash edited in report-manifest.json": (
        lambda s: _edit_one_hash(s), ["report-manifest.json"], ["figures/roofline.png", "figures/roofline.svg", "report.md"]),
    "a line of the record edited": (
        lambda s: forge_the_record(s, lambda lines: edit_line(lines, "findings.json", "0" * 64)),
        ["checksums.jsonl"], []),
    "a line of the record removed": (
        lambda s: forge_the_record(s, lambda lines: lines[:3] + lines[4:]), ["checksums.jsonl"], []),
    "an unlinked line inserted": (
        lambda s: forge_the_record(s, lambda lines: [*lines[:-1], '{"file": "x", "sha256": "y"}', lines[-1]]),
        ["checksums.jsonl"], []),
    "the report's files cut off the record, findings edited": (
        lambda s: (forge_the_record(s, lambda lines: lines[:next(i for i, x in enumerate(lines) if RESULTS in x)]),
                   edit_verdict(s / "findings.json")),
        ["findings.json", "report-manifest.json"], []),
    "findings edited, blessed in a record relinked throughout": (
        lambda s: (edit_verdict(s / "findings.json"), bless(s, "findings.json"),
                   forge_the_record(s, lambda lines: relinked(
                       edit_line(lines, "findings.json", sha256_file(s / "findings.json"))))),
        ["report-manifest.json"], []),
}


def _edit_one_hash(sweep: Path) -> None:
    record = json.loads((sweep / "report-manifest.json").read_text())
    record["files"]["figures/roofline.png"] = "f" * 64
    (sweep / "report-manifest.json").write_text(json.dumps(record, indent=1))


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forgery_of_files_and_records_fails_verify_naming_only_what_changed(
    forgery: str, sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forge, named, untouched = FORGERIES[forgery]
    forge(sweep)
    code, out, _ = verify(sweep, capsys)
    assert code == 1, out
    blamed = {line.split(": ", 1)[0] for line in out.splitlines() if ": " in line}
    for name in named:
        assert str(sweep / name) in blamed, (name, out)
    for name in untouched:
        assert str(sweep / name) not in blamed, (name, out)


def test_a_record_rewritten_whole_is_caught_by_the_head_kept_elsewhere(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = verify(sweep, capsys)
    head = out.split("checksums.jsonl head: ")[1].split()[0]
    assert code == 0 and verify(sweep, capsys, "--head", head)[0] == 0
    edit_verdict(sweep / "findings.json")
    forge_the_record(sweep, lambda lines: relinked(edit_line(lines, "findings.json", sha256_file(sweep / "findings.json"))))
    record = json.loads((sweep / "report-manifest.json").read_text())  # report-manifest.json re-blessed, and its line
    record["files"]["findings.json"] = sha256_file(sweep / "findings.json")
    (sweep / "report-manifest.json").write_text(json.dumps(record, indent=1))
    forge_the_record(sweep, lambda lines: relinked(
        edit_line(lines, "report-manifest.json", sha256_file(sweep / "report-manifest.json"))))
    assert verify(sweep, capsys)[0] == 0  # a whole rewrite is consistent with itself: only the head tells
    code, out, _ = verify(sweep, capsys, "--head", head)
    assert code == 1 and f"does not hold the state {head} you kept" in out


def test_a_kept_head_is_read_in_either_case_and_as_a_unique_prefix_and_a_bad_one_is_named_as_such(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = verify(sweep, capsys)[1].split("checksums.jsonl head: ")[1].split()[0]
    for given in (head.upper(), head[:12], head[:20].upper()):
        code, out, _ = verify(sweep, capsys, "--head", given)
        assert code == 0, (given, out)
    for given, says in ((head[:6], "6 hex digits; give the whole head (64) or at least its first 12"),
                        ("not-a-head", "not a sha256 (64 hex digits"), (head + "0", "not a sha256")):  # fmt: skip
        code, _, err = verify(sweep, capsys, "--head", given)
        assert code == 2 and err.count("\n") == 1 and says in err, (given, err)
    other = ("0" if head[0] != "0" else "1") + head[1:12]
    code, out, _ = verify(sweep, capsys, "--head", other)
    assert code == 1 and f"does not hold the state {other} you kept: the record was rewritten since" in out
