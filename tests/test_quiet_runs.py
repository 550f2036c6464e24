"""A sweep's log says what happens and nothing else: one line per model load (no per-tensor bar from every
worker), and no notice from Ray about the authentication it uses by default on a local cluster."""

from __future__ import annotations

import logging

import pytest

from orchestrator import cluster
from orchestrator.plan import plan_runs
from specs.loader import load_spec
from specs.results import RunStatus
from specs.schema import QualitySpec
from tests.worker_fixtures import one_thread  # noqa: F401  (a fixture: usefixtures finds it by name)
from workers.runner import Worker


@pytest.mark.usefixtures("one_thread")
def test_a_checkpoint_load_prints_one_line_and_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    planned = plan_runs(load_spec("specs/smoke.yaml"))
    config = next(r.config for r in planned if r.config.model.arch == "llama" and r.config.llama_impl is None)
    config = config.model_copy(update={
        "quality": QualitySpec(), "evaluator": None,
        "controls": config.controls.model_copy(update={"warmup": 0, "repetitions": 1}),
    })
    result = Worker().run(config, sweep="smoke", run_id="quiet")
    assert result.status == RunStatus.OK, result.traceback
    out, err = capfd.readouterr()
    loads = [line for line in (out + err).splitlines() if line.startswith("loaded ")]
    assert loads == [loads[0]] and loads[0].startswith("loaded llama-mini (") and " real weights) on cpu in " in loads[0]
    assert "Loading weights" not in out + err


def _emit(message: str) -> list[str]:
    """What Ray's authentication logger lets through, once the sweep has quietened it."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    handler = Keep()
    log.addHandler(handler)
    try:
        cluster._quiet_default_auth_notice()
        cluster._quiet_default_auth_notice()  # idempotent: one filter however often a sweep connects
        log.warning(message)
    finally:
        log.removeHandler(handler)
    return seen


def test_rays_notice_of_its_default_authentication_is_dropped_and_nothing_else() -> None:
    notice = ("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out. "
              "For more information, see https://docs.ray.io/en/latest/ray-security/token-auth.html")
    assert _emit(notice) == []
    disabled = "Token authentication is disabled for this Ray cluster. Anyone with network access ..."
    assert _emit(disabled) == [disabled]  # a cluster without authentication still says so
    log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    assert sum(isinstance(f, cluster._DefaultAuthNotice) for f in log.filters) == 1
