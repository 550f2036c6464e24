"""Connecting to Ray: a cluster named by RAY_ADDRESS, else a private local one bound to loopback."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import NoReturn

from orchestrator.reaper import Watchdog, start_watchdog

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Capacity:
    """What the connected cluster offers for one-accelerator units of work."""

    gpus: int
    cpus: int


CLUSTER_MODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

_connected = False  # this process called ray.init through connect(), so disconnect() undoes it
_watchdog: Watchdog | None = None  # kills the local Ray's processes if this process dies
_start_cut_short = False  # a ray.init that an interrupt (or an error) cut short: see exit_process()


def connect(*, num_cpus: int | None = None) -> Capacity:
    """Join RAY_ADDRESS when set (a cluster, `ray job submit`), else start a local Ray on 127.0.0.1 only,
    watched so that none of its processes outlives this one (orchestrator/reaper.py)."""
    global _connected, _watchdog
    if os.environ.get("RAY_ADDRESS"):
        import ray

        if not ray.is_initialized():
            _connected = True
            ray.init(log_to_driver=True, logging_level="WARNING")
        return capacity()
    _loopback_only()
    import ray

    if ray.is_initialized():
        return capacity()
    _connected = True
    if _watchdog is None:
        _watchdog = start_watchdog()
    _quiet_default_auth_notice()
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=False,
        _node_ip_address=LOOPBACK,
        log_to_driver=True,
        logging_level="WARNING",
    )
    return capacity()


class _DefaultAuthNotice(logging.Filter):
    """Drops Ray's notice that a new local cluster uses token authentication, its default: the sweep keeps that
    default (setting RAY_AUTH_MODE=token instead would silence it too, but only before Ray is first imported;
    after, Ray's cached config starts the cluster without authentication). Every other Ray message passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(AUTH_NOTICE)


AUTH_NOTICE = "Token authentication is enabled for this Ray cluster"
_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def _quiet_default_auth_notice() -> None:
    log = logging.getLogger(_AUTH_LOGGER)
    if not any(isinstance(f, _DefaultAuthNotice) for f in log.filters):
        log.addFilter(_DefaultAuthNotice())


def _loopback_only() -> None:
    """Ray on Linux binds every interface in "cluster mode"; with it off, its servers listen on loopback.
    Ray reads the switch when it is first imported, and its children read the environment."""
    os.environ.setdefault(CLUSTER_MODE_ENV, "0")
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - layout of a future Ray
        return
    ray_constants.ENABLE_RAY_CLUSTER = os.environ[CLUSTER_MODE_ENV].lower() in ("1", "true")


def capacity() -> Capacity:
    import ray

    resources = ray.cluster_resources()
    return Capacity(gpus=int(resources.get("GPU", 0)), cpus=int(resources.get("CPU", 1)))


def disconnect() -> None:
    """Undo connect(): shut Ray down and make sure no process of a local Ray is left (also after a start
    that was interrupted half-way). Does nothing when this process did not connect through connect()."""
    global _connected, _watchdog, _start_cut_short
    if not _connected:
        return
    import ray

    known = _watchdog.snapshot() if _watchdog is not None else {}
    if not ray.is_initialized():
        _start_cut_short = True
    try:
        ray.shutdown()
    finally:
        _connected = False
        if _watchdog is not None:
            _watchdog.finish(known)
            _watchdog = None


def exit_process(code: int) -> NoReturn:
    """End the process with `code`. After a Ray start that was cut short (SIGTERM while ray.init waits on its
    core worker), Ray's half-built native side can abort the interpreter's teardown, so the process would die
    by SIGABRT or SIGSEGV instead of exiting with `code`; it then leaves at once, its output flushed. By then
    every result and the manifest are written and closed, and the kernel releases the sweep's lock."""
    sys.stdout.flush()
    sys.stderr.flush()
    if _start_cut_short:
        os._exit(code)
    sys.exit(code)
