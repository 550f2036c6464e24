"""Nothing of the user's touched, nothing hangs: special files (FIFO, socket, device), symlinks out of a sweep
and oversized files, in a sweep folder or as a spec, are each refused with one line naming the path (exit 2)
by verify, sweep and report alike; numeric options are checked at parse time; a run copied in from another
spec or sweep is named; the report removes only figures it draws and takes the sweep's lock."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.cli import EXIT_USAGE, main
from report.cli import main as report_main
from specs import safefile
from specs.artifacts import SweepLayout, read_checksums, verify
from specs.chain import Record, RecordWriter
from specs.loader import PACKAGE_ROOT
from specs.lock import SweepLock
from specs.safefile import (
    CHECKSUMS_MAX_BYTES,
    MANIFEST_MAX_BYTES,
    PROMPTS_MAX_BYTES,
    RUN_MAX_BYTES,
    SPEC_MAX_BYTES,
)
from tests.spec_fixtures import tiny_spec, write_spec
from tests.sweep_faults import finished_sweep, small_spec
from tests.test_output_dir import one_line_error

pytestmark = pytest.mark.timeout(60)  # a refusal is immediate: anything slower is a hang


# ---------------------------------------------------------------- special files, made on demand


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_socket(path: Path) -> None:
    # AF_UNIX paths are short (108 bytes): bind in a short directory, then move the socket file into place.
    short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(short / "s"))
        os.rename(short / "s", path)
    finally:
        server.close()
        shutil.rmtree(short, ignore_errors=True)


def make_device(path: Path) -> None:
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # what /dev/zero is: reads never end
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")


MAKERS: dict[str, Callable[[Path], None]] = {"fifo": make_fifo, "socket": make_socket, "device": make_device}


class UserFiles:
    """A folder of someone's files outside the sweep; `untouched()` says none was read-modified, replaced or
    deleted (content, inode and mtime) and nothing was added."""

    def __init__(self, root: Path) -> None:
        self.root = root
        files = {"photo.png": b"\x89PNG my photo", "notes.txt": b"my notes", "0123456789ab.json": b'{"mine": 1}'}
        root.mkdir(parents=True)
        for name, data in files.items():
            (root / name).write_bytes(data)
        self.before = self._state()

    def _state(self) -> dict[str, tuple[bytes, int, int]]:
        return {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(self.root.iterdir())}

    def untouched(self) -> bool:
        return self._state() == self.before


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[Path, Path]:
    """(spec, sweep directory) of a finished small sweep, made without running anything."""
    spec = small_spec(tmp_path)
    out = tmp_path / "out"
    finished_sweep(spec, out)
    return spec, out


def first_run(out: Path) -> Path:
    return min((out / "runs").glob("*.json"))


LOCATIONS = ("spec.yaml", "checksums.jsonl", "manifest.json", "run file", "runs", "figures", "report.md",
             "figures/a.png", "sweep.lock", "notes")  # notes: a name a sweep never uses


def location(out: Path, where: str) -> Path:
    """The path a case replaces (its parent made when it is a figure)."""
    if where == "run file":
        return first_run(out)
    if where == "figures/a.png":
        (out / "figures").mkdir(exist_ok=True)
    return out / where


def replace_with(path: Path, make: Callable[[Path], None]) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def run_commands(spec: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, int, str]]:
    """verify, a resumed sweep and an unverified report on the folder: (command, exit status, its error line)."""
    done = []
    for name, call in (
        ("verify", lambda: main(["verify", str(out)])),
        ("sweep", lambda: main(["sweep", str(spec), "--out", str(out), "--no-report"])),
        ("report", lambda: report_main([str(out), "--allow-unverified"])),
    ):
        code = call()
        done.append((name, code, capsys.readouterr().err))
    return done


@pytest.mark.parametrize("where", LOCATIONS)
@pytest.mark.parametrize("kind", [*MAKERS, "symlink out"])
def test_a_special_file_or_a_link_out_anywhere_in_a_sweep_is_refused_in_one_line(
    kind: str, where: str, sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = sweep
    theirs = UserFiles(tmp_path / "theirs")
    path = location(out, where)
    target = theirs.root if where in ("runs", "figures") else theirs.root / "0123456789ab.json"
    replace_with(path, MAKERS.get(kind) or (lambda p: p.symlink_to(target)))
    for command, code, err in run_commands(spec, out, capsys):
        assert code == EXIT_USAGE, (command, err)
        line = one_line_error(err)
        assert str(path) in line, (command, line)
        assert ("symlink" if kind == "symlink out" else "never") in line, (command, line)
    assert theirs.untouched()
    assert not (out / "report.html").exists() and not (out / "results.parquet").exists()


OVERSIZED = {"spec.yaml": SPEC_MAX_BYTES, "checksums.jsonl": CHECKSUMS_MAX_BYTES,
             "manifest.json": MANIFEST_MAX_BYTES, "run file": RUN_MAX_BYTES}


@pytest.mark.parametrize("where", OVERSIZED)
def test_a_file_too_large_to_read_whole_is_refused_before_it_is_read(
    where: str, sweep: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sweep
    path = location(out, where)
    os.truncate(path, OVERSIZED[where] + 1)  # sparse: costs no disk
    assert main(["verify", str(out)]) == EXIT_USAGE
    line = one_line_error(capsys.readouterr().err)
    assert str(path) in line and "MiB" in line and "not read" in line
    if where in ("checksums.jsonl", "manifest.json"):  # the report reads them whole too, before rendering
        assert report_main([str(out), "--allow-unverified"]) == EXIT_USAGE
        assert str(path) in one_line_error(capsys.readouterr().err)
    if where == "run file":  # the 2 GB run file: left out unread, named, and the rest rendered
        assert report_main([str(out), "--allow-unverified"]) == 0
        assert f"{path}: " in capsys.readouterr().err
        assert f"{path}: " in (out / "report.md").read_text() and "not read" in (out / "report.md").read_text()


# ---------------------------------------------------------------- the spec


@pytest.mark.parametrize("kind", [*MAKERS, "directory", "oversized", "link to a fifo"])
def test_a_spec_that_is_no_regular_file_is_refused_in_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spec.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "oversized":
        path.write_text("name: big\n")
        os.truncate(path, SPEC_MAX_BYTES + 1)
    elif kind == "link to a fifo":
        make_fifo(tmp_path / "pipe")
        path.symlink_to(tmp_path / "pipe")
    else:
        MAKERS[kind](path)
    for command in (["plan", str(path)], ["sweep", str(path), "--out", str(tmp_path / "out"), "--no-report"]):
        assert main(command) == EXIT_USAGE
        assert str(path) in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", [*MAKERS, "oversized"])
def test_a_prompt_file_that_is_no_regular_file_is_refused_in_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "prompts.txt"
    if kind == "oversized":
        prompts.write_text("a passage\n")
        os.truncate(prompts, PROMPTS_MAX_BYTES + 1)
    else:
        MAKERS[kind](prompts)
    data = tiny_spec()
    data["prompts"]["dataset"] = str(prompts)
    spec = write_spec(tmp_path, data, "spec.yaml")
    assert main(["plan", str(spec)]) == EXIT_USAGE
    line = one_line_error(capsys.readouterr().err)
    assert f"prompts.dataset: {prompts}: " in line and ("never read" in line or "not read" in line)


@pytest.mark.parametrize("spec", ["fifo", "/dev/zero"])
def test_plan_on_a_fifo_or_dev_zero_neither_hangs_nor_grows(spec: str, tmp_path: Path) -> None:
    """The issue's cases, in a process of their own: a FIFO hung `plan`, /dev/zero grew to all memory."""
    if spec == "fifo":
        make_fifo(tmp_path / "spec.yaml")
        spec = str(tmp_path / "spec.yaml")
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "plan", spec], cwd=PACKAGE_ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == EXIT_USAGE and spec in one_line_error(done.stderr)


@pytest.mark.parametrize("command", [["verify"], ["report", "--allow-unverified"]])
def test_a_fifo_as_checksums_never_blocks_verify_or_report(
    command: list[str], sweep: tuple[Path, Path]
) -> None:
    _, out = sweep
    replace_with(out / "checksums.jsonl", make_fifo)
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", command[0], str(out), *command[1:]],
                          cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == EXIT_USAGE
    assert f"{out / 'checksums.jsonl'}: is a FIFO" in one_line_error(done.stderr)


def test_a_runs_folder_linked_to_a_users_folder_is_never_written_through(
    sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = sweep
    theirs = UserFiles(tmp_path / "theirs")
    shutil.rmtree(out / "runs")
    (out / "runs").symlink_to(theirs.root)
    assert main(["sweep", str(spec), "--out", str(out), "--no-report", "--force"]) == EXIT_USAGE
    assert f"{out / 'runs'}: is a symlink" in one_line_error(capsys.readouterr().err)
    assert theirs.untouched()


# ---------------------------------------------------------------- numeric options


@pytest.mark.parametrize("option", ["--stop-after", "--max-predicted-hours"])
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "abc"])
def test_numeric_options_are_checked_at_parse_time(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sweep", str(small_spec(tmp_path)), "--out", str(tmp_path / "out"), option, value])
    assert exited.value.code == EXIT_USAGE
    line = one_line_error(capsys.readouterr().err)
    assert f"argument {option}: " in line and value in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", ["--cfg-scale", "--temperature"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "warm"])
def test_the_rooflines_numeric_options_are_checked_at_parse_time(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from roofline.cli import main as roofline_main

    args = ["llada", "--prompt-len", "8", "--gen-len", "32", "--block-length", "32", "--steps", "8", option, value]
    assert roofline_main(args) == EXIT_USAGE
    line = one_line_error(capsys.readouterr().err)
    assert f"argument {option}: " in line and value in line


# ---------------------------------------------------------------- a run copied in from elsewhere


def other_sweep(tmp_path: Path) -> Path:
    """A finished sweep of the same name whose spec has another grid (prompt length 16): other run ids."""
    (tmp_path / "other").mkdir()
    out = tmp_path / "other-out"
    finished_sweep(small_spec(tmp_path / "other", prompt_lengths=[16]), out)
    return out


def forge_in(out: Path, foreign: Path, name: str) -> Path:
    """Copy a run file into the sweep as `name` and make the manifest and the checksum record agree (a linked line,
    as a forger who knows the record's format writes it)."""
    target = out / "runs" / f"{name}.json"
    manifest = json.loads((out / "manifest.json").read_text())
    # Its writer names this sweep: a line naming another would break the record (a record names one sweep).
    digest = RecordWriter.open(out / "checksums.jsonl", out, manifest["sweep"], "sweep").write(target, foreign.read_bytes())
    manifest["runs"][name] = digest
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert digest in (read_checksums(SweepLayout(out)) or {})[f"runs/{name}.json"]
    return target


def test_verify_names_a_run_copied_in_from_another_sweep_and_the_report_refuses_it(
    sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sweep
    other = other_sweep(tmp_path)
    data = json.loads(first_run(other).read_text())
    data["sweep"] = "elsewhere"
    (tmp_path / "copied.json").write_text(json.dumps(data, indent=1))
    copied = forge_in(out, tmp_path / "copied.json", first_run(other).stem)
    assert main(["verify", str(out)]) == 1
    printed = capsys.readouterr().out
    assert f"{copied}: a run of sweep 'elsewhere', not of " in printed
    assert report_main([str(out)]) == EXIT_USAGE
    assert "copied in from another sweep" in one_line_error(capsys.readouterr().err)


def test_verify_names_a_run_of_another_spec_under_the_same_sweep_name(
    sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sweep
    other = other_sweep(tmp_path)  # same name, another grid
    copied = forge_in(out, first_run(other), first_run(other).stem)
    assert main(["verify", str(out)]) == 1
    assert f"{copied}: not a run of this sweep's spec" in capsys.readouterr().out
    # Renamed to an id this spec plans: its config gives it away.
    (out / "runs" / f"{copied.stem}.json").unlink()
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["runs"][copied.stem]
    (out / "manifest.json").write_text(json.dumps(manifest))
    own = first_run(out)
    data = json.loads(first_run(other).read_text())
    data["run_id"] = own.stem
    (tmp_path / "renamed.json").write_text(json.dumps(data, indent=1))
    own.unlink()
    forge_in(out, tmp_path / "renamed.json", own.stem)
    assert main(["verify", str(out)]) == 1
    assert f"{own}: its config is not the one its id stands for" in capsys.readouterr().out


# ---------------------------------------------------------------- the report's own folder


def test_report_refuses_a_figures_link_into_a_users_folder_and_deletes_nothing(
    sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sweep
    theirs = UserFiles(tmp_path / "theirs")
    (out / "figures").symlink_to(theirs.root)
    for args in ([str(out)], [str(out), "--allow-unverified"]):
        assert report_main(args) == EXIT_USAGE
        assert f"{out / 'figures'}: is a symlink" in one_line_error(capsys.readouterr().err)
    assert theirs.untouched()


@pytest.mark.parametrize("occupied", ["figures is a file", "report.md is a folder", "findings.json is a folder",
                                      "results.parquet is a folder"])
def test_report_refuses_what_it_would_write_over_in_one_line(
    occupied: str, sweep: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sweep
    name, _, kind = occupied.partition(" is a ")
    if kind == "file":
        (out / name).write_text("mine")
    else:
        (out / name).mkdir()
        (out / name / "keep.txt").write_text("mine")
    assert report_main([str(out), "--allow-unverified"]) == EXIT_USAGE
    assert str(out / name) in one_line_error(capsys.readouterr().err)
    assert (out / name / "keep.txt").read_text() == "mine" if kind == "folder" else (out / name).read_text() == "mine"


def test_a_report_or_a_sweep_waits_for_nobody_while_a_report_holds_the_folder(
    sweep: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = sweep
    with SweepLock(SweepLayout(out).lock, role="report"):
        assert report_main([str(out)]) == EXIT_USAGE
        assert "another report is writing here" in one_line_error(capsys.readouterr().err)
        assert main(["sweep", str(spec), "--out", str(out), "--no-report"]) == EXIT_USAGE
        assert "another report is writing here" in one_line_error(capsys.readouterr().err)
    with SweepLock(SweepLayout(out).lock):
        assert report_main([str(out)]) == EXIT_USAGE
        assert "another sweep is writing here" in one_line_error(capsys.readouterr().err)
    assert not (out / "sweep.lock").exists() and not (out / "report.html").exists()


def test_temporary_names_are_unique_and_a_recorded_writers_own(tmp_path: Path, monkeypatch) -> None:
    made: list[str] = []
    mkstemp = safefile.tempfile.mkstemp
    monkeypatch.setattr(safefile.tempfile, "mkstemp", lambda **kw: made.append(kw["prefix"]) or mkstemp(**kw))
    safefile.atomic_write(tmp_path / "report.md", b"x")
    assert made == [f".report.md.{safefile.WRITER_TOKEN}."]
    record = Record(tmp_path / "checksums.jsonl", writers={safefile.WRITER_TOKEN})
    for name in (f".report.md.{safefile.WRITER_TOKEN}.k2j4_x.tmp", f".0123456789ab.json.{safefile.WRITER_TOKEN}.q.tmp"):
        assert record.is_temporary(name), name
    for name in ("report.md.tmp", ".report.md.k2j4_x.tmp", ".notes.txt.0123456789abcdef.x.tmp", "report.md.bak"):
        assert not record.is_temporary(name), name



# ---------------------------------------------------------------- rendering: what it removes, what it warns


@pytest.mark.timeout(300)
def test_report_removes_only_figures_it_drew_and_warns_at_the_top_when_unverified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from report_fixtures import SMOKE_LIKE, write_sweep

    root = write_sweep(tmp_path, SMOKE_LIKE)
    figures = root / "figures"
    figures.mkdir()
    # Files of the user's, one named as the catalogue names a figure this sweep does not draw: never removed.
    mine = {"my-photo.png": b"\x89PNG mine", "Roofline.png": b"mine too", "roofline_old.svg": b"<svg/>",
            "energy_per_token.png": b"\x89PNG my own energy plot"}
    for name, data in mine.items():
        (figures / name).write_bytes(data)
    earlier = RecordWriter.open(root / "checksums.jsonl", root, "smoke", "report")  # as an earlier report drew it
    earlier.write(figures / "variant_speedup.png", b"an earlier report's figure, not drawn for this sweep")
    assert report_main([str(root), "--allow-unverified"]) == 0  # verified: my-photo.png is a figure, no stray
    err = capsys.readouterr().err
    assert "UNVERIFIED" not in err
    assert {name: (figures / name).read_bytes() for name in mine} == mine  # not the report's: kept
    assert not (figures / "variant_speedup.png").exists()  # the report drew it, not this time: removed
    assert (figures / "roofline.png").is_file()
    assert "unverified" not in json.loads((root / "findings.json").read_text())
    assert not [p for p in root.rglob("*.tmp")] and not (root / "sweep.lock").exists()

    victim = min((root / "runs").glob("*.json"))
    victim.write_text(victim.read_text().replace('"ok"', '"oom"', 1))
    assert report_main([str(root), "--allow-unverified"]) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "UNVERIFIED" in line]
    assert len(warning) == 1 and str(victim) in warning[0]
    markdown = (root / "report.md").read_text().splitlines()
    first_section = next(i for i, line in enumerate(markdown) if line.startswith("## "))
    top = [i for i, line in enumerate(markdown) if line.startswith("> **Warning:** UNVERIFIED")]
    assert top and top[0] < first_section and str(victim) in markdown[top[0]]
    html = (root / "report.html").read_text()
    assert -1 < html.index('<p class="warning">UNVERIFIED') < html.index("<nav>")
    findings = json.loads((root / "findings.json").read_text())
    assert next(iter(findings)) == "unverified" and any(str(victim) in p for p in findings["unverified"])


# ---------------------------------------------------------------- the campaign script


CAMPAIGN = PACKAGE_ROOT / "container" / "gpu-campaign.sh"


def campaign(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "LLADA_GPU_SITE": str(cwd / "site")}
    env.pop("LLADA_CAMPAIGN_BUDGET_S", None)
    return subprocess.run([str(CAMPAIGN), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "named"), [
    (["--bundle"], "--bundle needs a value"),
    (["--out", "--budget", "9"], "--out needs a value"),
    (["--budget", "abc"], "--budget abc: not a number of seconds"),
    (["--budget", "nan"], "--budget nan:"),
    (["--budget", "-5"], "--budget -5:"),
    (["--budget", "0"], "--budget 0:"),
    (["--bundle", "no-such-bundle"], "no-such-bundle: no such directory"),
    (["--bundle", "."], "holds no wheels/ folder"),
    (["--frobnicate"], "unknown option --frobnicate"),
])
def test_campaign_checks_every_argument_in_one_line(args: list[str], named: str, tmp_path: Path) -> None:
    done = campaign(*args, cwd=tmp_path)
    assert done.returncode == 2 and named in one_line_error(done.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_campaign_never_packs_or_replaces_what_is_not_its_own(tmp_path: Path) -> None:
    """Each case imports torch once (the script's check of this Python) and stops before any run."""
    spec = small_spec(tmp_path)
    missing = campaign("missing.yaml", cwd=tmp_path)
    assert missing.returncode == 2 and "missing.yaml: no such spec file" in one_line_error(missing.stderr)

    theirs = UserFiles(tmp_path / "theirs")  # a folder the sweep refuses: never packed
    (tmp_path / "theirs.tar.gz").write_bytes(b"my own archive")
    refused = campaign(str(spec), "--out", "theirs", "--budget", "60", cwd=tmp_path)
    assert refused.returncode == 2 and "exists and is not a pack of this sweep" in refused.stderr
    assert (tmp_path / "theirs.tar.gz").read_bytes() == b"my own archive"
    (tmp_path / "theirs.tar.gz").unlink()
    refused = campaign(str(spec), "--out", "theirs", "--budget", "60", cwd=tmp_path)
    assert refused.returncode == 2 and "holds no sweep" in refused.stderr and "not packed" in refused.stderr
    assert not (tmp_path / "theirs.tar.gz").exists() and theirs.untouched()

    for root in ("/", os.path.expanduser("~")):
        done = campaign(str(spec), "--out", root, "--tarball", str(tmp_path / "t.tar.gz"), cwd=tmp_path)
        assert done.returncode == 2 and f"--out {root}: is" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "t.tar.gz").exists()


# ---------------------------------------------------------------- the justfile


def test_every_justfile_recipe_passes_its_arguments_quoted(tmp_path: Path, sweep: tuple[Path, Path]) -> None:
    text = (PACKAGE_ROOT / "justfile").read_text()
    assert not re.findall(r"\{\{\s*[A-Z_]+\s*\}\}", text), "a recipe interpolates a parameter unquoted"
    _, out = sweep
    spaced = tmp_path / "my sweeps" / "one"
    spaced.parent.mkdir()
    out.rename(spaced)
    just = shutil.which("just", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if just is None:
        pytest.skip("just not found: pip install rust-just")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([just, "--justfile", str(PACKAGE_ROOT / "justfile"), "verify", str(spaced)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert f"{spaced}: verified" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_reports_on_one_folder_at_once_never_race(tmp_path: Path) -> None:
    """The issue's case: a second report a moment after the first raced on the same temporary file. Now the
    later one finds the lock held and says so in one line, or (started after the first ended) renders too."""
    from report_fixtures import SMOKE_LIKE, write_sweep

    root = write_sweep(tmp_path, SMOKE_LIKE)
    command = [sys.executable, "-m", "orchestrator.cli", "report", str(root)]
    env = {**os.environ, "PYTHONPATH": f"{PACKAGE_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    first = subprocess.Popen(command, cwd=PACKAGE_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 120
        while not (root / "sweep.lock").exists() and first.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.run(command, cwd=PACKAGE_ROOT, env=env, capture_output=True, text=True, timeout=300)
        _, first_err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, first_err
    assert second.returncode in (0, EXIT_USAGE), second.stderr
    if second.returncode == EXIT_USAGE:
        assert "another report is writing here" in one_line_error(second.stderr)
    assert "Traceback" not in first_err + second.stderr
    assert not list(root.rglob("*.tmp")) and not (root / "sweep.lock").exists()
    assert verify(SweepLayout(root)) == []
