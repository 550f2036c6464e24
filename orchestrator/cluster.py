"""Connecting to Ray: a cluster named by RAY_ADDRESS, else a private local one bound to loopback."""

from __future__ import annotations

import os
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Capacity:
    """What the connected cluster offers for one-accelerator units of work."""

    gpus: int
    cpus: int


def connect(*, num_cpus: int | None = None) -> Capacity:
    """Join RAY_ADDRESS when set (a cluster, `ray job submit`), else start a local Ray on 127.0.0.1 only."""
    import ray

    if ray.is_initialized():
        return capacity()
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=True, logging_level="WARNING")
        return capacity()
    # Ray on Linux binds every interface unless this is off; a benchmark driver listens on loopback only.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=False,
        _node_ip_address=LOOPBACK,
        log_to_driver=True,
        logging_level="WARNING",
    )
    return capacity()


def capacity() -> Capacity:
    import ray

    resources = ray.cluster_resources()
    return Capacity(gpus=int(resources.get("GPU", 0)), cpus=int(resources.get("CPU", 1)))


def disconnect() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
