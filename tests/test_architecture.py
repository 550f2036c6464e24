"""The stage boundaries of DESIGN.md hold: the driver, the report and the roofline never load torch or the
workers, so `just figures` and planning work on a machine with neither."""

from __future__ import annotations

import subprocess
import sys

from specs.loader import PACKAGE_ROOT

LIGHT_MODULES = [
    "orchestrator.cli", "orchestrator.driver", "orchestrator.plan", "orchestrator.store", "orchestrator.assets",
    "report.document.render", "report.cli", "roofline.cli", "roofline.predict", "specs.loader",
]


def test_driver_report_and_roofline_import_no_torch_and_no_workers() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {LIGHT_MODULES!r}: importlib.import_module(name)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'workers'))\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
