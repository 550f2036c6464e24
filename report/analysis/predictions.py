"""Roofline predictions beside each measured run: the profile of the device that ran (its measured roofs, else
its datasheet), predicted latency on the roofs alone (a lower bound) and with the profile's floor (the host floor
per eager forward, else the per-launch dispatch floor), for the study and faithful fidelities; each run's
roofline efficiency and whether it violated the bound; and its measured operating point (achieved FLOP/s at its
intensity)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from roofline.errors import RooflineInputError
from roofline.fidelity import FIDELITIES
from roofline.hardware import HARDWARE, HardwareProfile, get_hardware, hardware_for_gpu_name
from roofline.measured import VIOLATION_FRACTION, predict_result, profile_from_roofs, run_profile
from specs.registry import full_shape
from specs.results import MeasuredRoofs, RunResult
from specs.shapes import ModelShape

PREDICTION_SCHEMA = {
    "run_id": pl.String, "hardware": pl.String, "profile": pl.String, "fidelity": pl.String, "arch": pl.String,
    "model": pl.String, "impl": pl.String, "batch_size": pl.Int64, "predicted_latency_s": pl.Float64,
    "predicted_latency_roofs_s": pl.Float64, "predicted_flops": pl.Float64,
    "predicted_bytes": pl.Float64, "predicted_peak_memory_bytes": pl.Int64, "predicted_fits": pl.Boolean,
    "measured_latency_s": pl.Float64, "arithmetic_intensity": pl.Float64, "measured_flops_per_s": pl.Float64,
    "out_of_scope": pl.String, "predicted_forwards": pl.Int64, "forwards_source": pl.String,
    # predicted_latency_roofs_s / measured: the share of the roofs the run reached (above 1: faster than a bound).
    "roofline_efficiency": pl.Float64,
    # measured faster than VIOLATION_FRACTION x the roofs-only prediction: the roofline failed to bound the run
    "roofline_violated": pl.Boolean,
}


class UnknownHardwareError(ValueError):
    """--hardware named a profile that does not exist, or one that is not the device the runs ran on."""


@dataclass(frozen=True)
class ProfileChoice:
    """The roofline profile for one hardware kind of the sweep, or why there is none."""

    hardware: str
    profile: HardwareProfile | None
    reason: str | None = None
    overridden: bool = False
    measured: bool = False  # the device's own roofs, measured by the worker


def measured_roofs_of(results: Iterable[RunResult], hardware: str) -> MeasuredRoofs | None:
    """The roofs the runs on `hardware` measured: the first successful run's (one worker measures once)."""
    for result in results:
        env = result.environment
        if env is not None and env.device == hardware and env.measured_roofs is not None:
            return env.measured_roofs
    return None


def choose_profile(hardware: str, roofs: MeasuredRoofs | None = None, override: str | None = None) -> ProfileChoice:
    """The profile of the device that ran: its measured roofs when the runs carry them, else its datasheet
    profile. `override` (--hardware) picks a datasheet profile only for a GPU whose name maps to no profile
    or to that same one: a run is never drawn against another device's roofs."""
    if override is not None:
        try:
            chosen = get_hardware(override)
        except KeyError:
            raise UnknownHardwareError(
                f"--hardware: unknown roofline profile {override!r}; allowed: {', '.join(HARDWARE)}"
            ) from None
        own = None if hardware in ("cpu", "unknown") else hardware_for_gpu_name(hardware)
        if hardware in ("cpu", "unknown") or (own is not None and own.name != chosen.name):
            raise UnknownHardwareError(
                f"--hardware {override}: the runs ran on {hardware}; predictions are drawn only against the "
                f"device that ran ({own.name if own else 'its measured roofs'}). CPU runs use the roofs their "
                "worker measured (see `llada-bench calibrate`)"
            )
        return ProfileChoice(hardware, chosen, overridden=True)
    if roofs is not None:
        return ProfileChoice(hardware, profile_from_roofs(roofs), measured=True)
    profile = None if hardware in ("cpu", "unknown") else hardware_for_gpu_name(hardware)
    if profile is None:
        return ProfileChoice(hardware, None, f"no roofline profile for hardware {hardware}: its runs carry no "
                                             "measured roofs (rerun the sweep: workers measure them) and no "
                                             "datasheet profile matches its name")
    return ProfileChoice(hardware, profile)


def prediction_table(results: Iterable[RunResult], table: pl.DataFrame, profile: HardwareProfile) -> pl.DataFrame:
    """One row per (successful run, fidelity) on `profile`, with and without the profile's dispatch floor. The
    study's model covers batch 1 without CFG and the vanilla implementations; other runs get null predictions
    under it and the reason in `out_of_scope`. A variant whose forwards vary is costed at its measured median
    forwards when the artifact has them, else at the step cap (`forwards_source`). The operating point uses the
    faithful FLOPs and bytes: intensity = FLOPs / bytes, achieved = FLOPs / measured median latency."""
    measured = {r["run_id"]: r for r in table.select("run_id", "latency_e2e_s_median", "hardware").iter_rows(named=True)}
    rows = []
    for result in results:
        run = measured.get(result.run_id)
        if result.status.value != "ok" or run is None:
            continue
        latency = run["latency_e2e_s_median"]
        own = run_profile(profile, result)
        for fidelity in FIDELITIES:
            base = (result.run_id, run["hardware"], profile.name, fidelity, result.config.model.arch,
                    result.config.model.name, result.config.impl_name, result.config.batch_size)
            try:
                p = predict_result(result, own, fidelity)
            except RooflineInputError as exc:
                rows.append((*base, None, None, None, None, None, None, latency, None, None, str(exc), None, None,
                             None, None))
                continue
            intensity = p.flops / p.bytes_ if p.bytes_ else None
            achieved = p.flops / latency if latency else None
            roofs = p.latency_roofs_s if p.latency_roofs_s is not None else p.latency_s
            efficiency = roofs / latency if latency else None
            violated = None if efficiency is None else efficiency > 1 / VIOLATION_FRACTION
            rows.append((*base, p.latency_s, roofs, float(p.flops), float(p.bytes_), p.peak_memory_bytes,
                         p.fits, latency, intensity, achieved, None, p.forwards, p.forwards_source, efficiency,
                         violated))
    return pl.DataFrame(rows, schema=PREDICTION_SCHEMA, orient="row")


ROOFLINE_COLUMNS = ("roofline_profile", "predicted_latency_roofs_s", "predicted_latency_s", "roofline_efficiency",
                    "roofline_violated")


def with_roofline_columns(table: pl.DataFrame, predictions: pl.DataFrame) -> pl.DataFrame:
    """`table` (report.table.flat.results_table) with each run's faithful prediction in ROOFLINE_COLUMNS; null for a
    run with no profile or outside the model's scope."""
    faithful = (
        predictions.filter((pl.col("fidelity") == "faithful") & pl.col("out_of_scope").is_null())
        .select("run_id", pl.col("profile").alias("roofline_profile"), "predicted_latency_roofs_s",
                "predicted_latency_s", "roofline_efficiency", "roofline_violated")
        .unique("run_id", keep="first")
    )
    order = table.columns
    return table.drop([c for c in ROOFLINE_COLUMNS if c in table.columns]).join(
        faithful, on="run_id", how="left"
    ).select(order)


def sweep_predictions(
    results: Iterable[RunResult], table: pl.DataFrame, profiles: dict[str, HardwareProfile]
) -> pl.DataFrame:
    """`prediction_table` of every hardware kind that has a profile, each kind's runs on its own profile."""
    results = list(results)
    frames = [
        prediction_table([r for r in results if r.environment is not None and r.environment.device == kind],
                         table.filter(pl.col("hardware") == kind), profile)
        for kind, profile in sorted(profiles.items())
    ]
    return pl.concat(frames) if frames else pl.DataFrame(schema=PREDICTION_SCHEMA)


def model_shapes(results: Iterable[RunResult]) -> dict[str, ModelShape]:
    """Each arch's shape as the sweep ran it: what the worker recorded, else a synthetic model's own, else (an
    older checkpoint artifact) the family's published shape."""
    shapes: dict[str, ModelShape] = {}
    for result in results:
        arch = result.config.model.arch
        if arch not in shapes or (result.model_shape is not None and shapes[arch] != result.model_shape):
            shapes[arch] = result.model_shape or result.config.model.shape() or full_shape(arch)
    return shapes
