"""Roofline predictions beside each measured run: the profile for a run's hardware, predicted latency and work
(study and faithful fidelities), and each run's measured operating point (achieved FLOP/s at its intensity)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from roofline.errors import RooflineInputError
from roofline.fidelity import FIDELITIES
from roofline.hardware import HARDWARE, HardwareProfile, get_hardware, hardware_for_gpu_name
from roofline.predict import predict_run
from specs.results import RunResult
from specs.shapes import ModelShape, preset_shape

PREDICTION_SCHEMA = {
    "run_id": pl.String, "hardware": pl.String, "profile": pl.String, "fidelity": pl.String, "arch": pl.String,
    "model": pl.String, "batch_size": pl.Int64, "predicted_latency_s": pl.Float64, "predicted_flops": pl.Float64,
    "predicted_bytes": pl.Float64, "predicted_peak_memory_bytes": pl.Int64, "predicted_fits": pl.Boolean,
    "measured_latency_s": pl.Float64, "arithmetic_intensity": pl.Float64, "measured_flops_per_s": pl.Float64,
    "out_of_scope": pl.String,
}


class UnknownHardwareError(ValueError):
    """--hardware named a profile that does not exist; the message lists the ones that do."""


@dataclass(frozen=True)
class ProfileChoice:
    """The roofline profile for one hardware kind of the sweep, or why there is none."""

    hardware: str
    profile: HardwareProfile | None
    reason: str | None = None
    overridden: bool = False


def choose_profile(hardware: str, override: str | None = None) -> ProfileChoice:
    """`override` (a profile name from --hardware) wins; else the device name maps to a profile or to None."""
    if override is not None:
        try:
            return ProfileChoice(hardware, get_hardware(override), overridden=True)
        except KeyError:
            raise UnknownHardwareError(
                f"--hardware: unknown roofline profile {override!r}; allowed: {', '.join(HARDWARE)}"
            ) from None
    profile = None if hardware in ("cpu", "unknown") else hardware_for_gpu_name(hardware)
    if profile is None:
        return ProfileChoice(hardware, None, f"no roofline profile for hardware {hardware} "
                                             "(give --hardware NAME to compare with a GPU profile)")
    return ProfileChoice(hardware, profile)


def prediction_table(results: Iterable[RunResult], table: pl.DataFrame, profile: HardwareProfile) -> pl.DataFrame:
    """One row per (successful run, fidelity) on `profile`. The study's model covers batch 1 without CFG; other
    runs get null predictions under it and the reason in `out_of_scope`. The operating point uses the faithful
    FLOPs and bytes: intensity = FLOPs / bytes, achieved = FLOPs / measured median latency."""
    measured = {r["run_id"]: r for r in table.select("run_id", "latency_e2e_s_median", "hardware").iter_rows(named=True)}
    rows = []
    for result in results:
        run = measured.get(result.run_id)
        if result.status.value != "ok" or run is None:
            continue
        latency = run["latency_e2e_s_median"]
        for fidelity in FIDELITIES:
            base = (result.run_id, run["hardware"], profile.name, fidelity, result.config.model.arch,
                    result.config.model.name, result.config.batch_size)
            try:
                p = predict_run(result.config, profile, fidelity)
            except RooflineInputError as exc:
                rows.append((*base, None, None, None, None, None, latency, None, None, str(exc)))
                continue
            intensity = p.flops / p.bytes_ if p.bytes_ else None
            achieved = p.flops / latency if latency else None
            rows.append((*base, p.latency_s, float(p.flops), float(p.bytes_), p.peak_memory_bytes, p.fits, latency,
                         intensity, achieved, None))
    return pl.DataFrame(rows, schema=PREDICTION_SCHEMA, orient="row")


def model_shapes(results: Iterable[RunResult]) -> dict[str, ModelShape]:
    """Each arch's shape as the sweep ran it: a synthetic model's own, else (a checkpoint) the 8B preset."""
    shapes: dict[str, ModelShape] = {}
    for result in results:
        arch = result.config.model.arch
        if arch not in shapes:
            shapes[arch] = result.config.model.shape() or preset_shape(arch, "8b")
    return shapes
