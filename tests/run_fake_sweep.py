"""`llada-bench sweep` with the stand-in actor, as its own process, for kill and signal tests.

Usage: python -m tests.run_fake_sweep SPEC OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import ray

from orchestrator.cli import sweep_command
from tests import fake_actors


def main() -> int:
    spec, out = sys.argv[1], Path(sys.argv[2])
    ray.cloudpickle.register_pickle_by_value(fake_actors)
    return sweep_command(spec, out=out, report=False, actor_class=fake_actors.FakeActor)


if __name__ == "__main__":
    raise SystemExit(main())
