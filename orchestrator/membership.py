"""Which run files of a sweep belong to its frozen spec: a run copied in from a sweep of another spec
(checksums made to match) is named by `verify`, not rendered as if this spec had produced it."""

from __future__ import annotations

from pydantic import ValidationError

from orchestrator.plan import plan_runs, run_id_for
from specs.artifacts import Problem, SweepLayout
from specs.loader import SpecError, parse_spec
from specs.results import RunResult
from specs.safefile import RUN_MAX_BYTES, SPEC_MAX_BYTES, read_bytes, read_text


def foreign_runs(layout: SweepLayout) -> list[Problem]:
    """Every run file whose id is not one the frozen spec plans, or whose config does not hash to its id.
    Nothing to say without a readable frozen spec (verify names that) or about a file that does not parse."""
    try:
        spec = parse_spec(read_text(layout.spec, SPEC_MAX_BYTES), source=str(layout.spec), check_files=False)
    except (SpecError, OSError, UnicodeDecodeError):
        return []
    planned = {run.run_id for run in plan_runs(spec)}
    problems = []
    for run_id, path in layout.run_files().items():
        if run_id not in planned:
            reason = (f"not a run of this sweep's spec ({layout.spec} plans {len(planned)} runs, none with "
                      "this id): copied in from a sweep of another spec?")
            problems.append(Problem(str(path), reason))
            continue
        try:
            result = RunResult.model_validate_json(read_bytes(path, RUN_MAX_BYTES))
        except (ValidationError, UnicodeDecodeError, OSError):  # unreadable, or not a result: verify names it
            continue
        if run_id_for(result.config) != run_id:
            problems.append(Problem(str(path), "its config is not the one its id stands for: the run of "
                                    "another spec under this spec's id"))
    return problems
