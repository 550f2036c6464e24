"""report.html in headless Chromium: every image loads, no request leaves the file, and a screenshot is saved.

Chromium (Debian `chromium`) is installed by .ci/run; without it this test skips locally and fails in CI.
Two independent checks that nothing is fetched: the page's own Resource Timing list (from a test-only copy of
the report with a checking script appended; the report itself has no script) and Chromium's net log, where a
request the page made carries the page's origin as initiator (the browser's own background requests carry
"not an origin"). A control page with an external image proves both checks see a request.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_fixtures import SMOKE_LIKE, write_sweep

from report.document.render import render_report

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
CHECK_ID = "llada-bench-check"
CHECK_SCRIPT = f"""<script>
window.addEventListener("load", () => {{
  const images = Array.from(document.images).map(img => ({{
    alt: img.alt, ok: img.complete && img.naturalWidth > 0, width: img.naturalWidth }}));
  const requests = performance.getEntriesByType("resource").map(entry => entry.name);
  const out = document.createElement("pre");
  out.id = "{CHECK_ID}";
  out.textContent = JSON.stringify({{ images, requests }});
  document.body.appendChild(out);
}});
</script>"""
BROWSER_INITIATOR = "not an origin"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; .ci/run must install Debian's `chromium` package")
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it and runs this test")


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def load_and_check(binary: str, page: Path, work: Path) -> tuple[dict, list[str]]:
    """Open a copy of `page` with the checking script; return its findings and the page's own net requests."""
    checked = page.with_name(page.stem + ".check.html")
    html = page.read_text(encoding="utf-8")
    checked.write_text(html.replace("</body>", CHECK_SCRIPT + "</body>", 1), encoding="utf-8")
    net_log = work / f"{page.stem}.netlog.json"
    result = run_chromium(binary, work / f"profile-{page.stem}", "--virtual-time-budget=10000",
                          f"--log-net-log={net_log}", "--dump-dom", checked.as_uri())
    found = re.search(rf'<pre id="{CHECK_ID}">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found, f"the checking script did not run; stderr: {result.stderr[-2000:]}"
    findings = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return findings, page_requests(net_log)


def page_requests(net_log: Path) -> list[str]:
    """URLs of network requests a page initiated (the browser's own background requests excluded)."""
    log = json.loads(net_log.read_text(encoding="utf-8"))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        # The job's begin event carries its URL and initiator; its end event carries neither.
        if event["type"] == start and "url" in params and params.get("initiator") != BROWSER_INITIATOR:
            urls.append(params["url"])
    return urls


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    root = write_sweep(tmp_path_factory.mktemp("artifacts"), SMOKE_LIKE)
    return render_report(root, echo=False)  # CPU runs: roofline against their measured roofs


def test_every_image_loads_and_nothing_is_fetched(report, tmp_path: Path) -> None:
    binary = chromium()
    findings, requests = load_and_check(binary, report.html, tmp_path)
    assert len(findings["images"]) == len(report.figures) >= 10
    broken = [image["alt"] for image in findings["images"] if not image["ok"]]
    assert not broken, f"images that did not load: {broken}"
    assert findings["requests"] == [], "the page fetched resources"
    assert requests == [], f"the page made network requests: {requests}"


def test_screenshot_of_the_report(report, tmp_path: Path) -> None:
    binary = chromium()
    shot = tmp_path / "report.png"
    run_chromium(binary, tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,4000",
                 f"--screenshot={shot}", report.html.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    keep = os.environ.get("REPORT_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report-smoke-like.png")


def test_the_checks_do_see_a_request(tmp_path: Path) -> None:
    """Control: a page with an external image is caught by both checks (so a pass above means something)."""
    binary = chromium()
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><html><body><img alt="remote" src="http://127.0.0.1:9/x.png"></body></html>',
                    encoding="utf-8")
    findings, requests = load_and_check(binary, page, tmp_path)
    assert findings["images"] == [{"alt": "remote", "ok": False, "width": 0}]
    assert findings["requests"] == ["http://127.0.0.1:9/x.png"]
    assert requests == ["http://127.0.0.1:9/x.png"]
