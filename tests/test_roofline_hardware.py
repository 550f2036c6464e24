"""Hardware profiles: the study's constants exactly, datasheet profiles, lookups by name and by device name."""

from __future__ import annotations

import pydantic
import pytest

from roofline.hardware import HARDWARE, HardwareProfile, get_hardware, hardware_for_gpu_name

REQUIRED = [
    "study-a6000",
    "a100-sxm4-80gb",
    "a100-pcie-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "a40",
    "rtx-a6000",
    "l40s",
    "rtx-4090",
]


def test_study_constants_are_exact() -> None:
    hw = get_hardware("study-a6000")
    assert hw.peak_tensor_flops_per_s == 242.56512e12 == 84 * 4 * 256 * 1.41e9 * 2
    assert hw.peak_vector_ops_per_s == 15.16032e12
    assert hw.memory_bandwidth_bytes_per_s == 768e9 == 384 * 2.0e9


@pytest.mark.parametrize("name", REQUIRED)
def test_required_profiles_exist_with_a_source(name: str) -> None:
    hw = HARDWARE[name]
    assert hw.name == name
    assert len(hw.source) > 20
    assert hw.memory_bytes >= 24 * 2**30
    # Every roof is in a sane range for a 2020s GPU, and tensor cores beat CUDA cores.
    assert 100e12 < hw.peak_tensor_flops_per_s < 1100e12
    assert hw.peak_vector_ops_per_s < hw.peak_tensor_flops_per_s / 3
    assert 600e9 < hw.memory_bandwidth_bytes_per_s < 5e12


def test_datasheet_values() -> None:
    assert get_hardware("a100-sxm4-80gb").peak_tensor_flops_per_s == 312e12
    assert get_hardware("a100-sxm4-80gb").memory_bandwidth_bytes_per_s == 2039e9
    assert get_hardware("a100-pcie-80gb").memory_bandwidth_bytes_per_s == 1935e9
    assert get_hardware("h100-sxm").peak_tensor_flops_per_s == pytest.approx(989.5e12)
    assert get_hardware("h200").memory_bytes == 141 * 2**30
    assert get_hardware("rtx-a6000").peak_tensor_flops_per_s == pytest.approx(154.8e12)
    # The study's compute roof is ~1.57x a real RTX A6000's (roofline-model.md).
    ratio = (
        get_hardware("study-a6000").peak_tensor_flops_per_s
        / get_hardware("rtx-a6000").peak_tensor_flops_per_s
    )
    assert ratio == pytest.approx(1.567, abs=1e-3)


def test_unknown_name_lists_the_allowed_ones() -> None:
    with pytest.raises(KeyError) as info:
        get_hardware("a6000")
    message = info.value.args[0]
    assert "unknown hardware 'a6000'" in message
    assert all(name in message for name in REQUIRED)


def test_profiles_are_frozen_and_strict() -> None:
    with pytest.raises(pydantic.ValidationError):
        get_hardware("a40").name = "other"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        HardwareProfile(
            name="x",
            peak_tensor_flops_per_s=1,
            peak_vector_ops_per_s=1,
            memory_bandwidth_bytes_per_s=1,
            memory_bytes=1,
            source="s",
            clock_hz=1,  # type: ignore[call-arg]
        )


@pytest.mark.parametrize(
    ("device_name", "profile"),
    [
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100-SXM4-40GB", None),
        ("NVIDIA A100-PCIE-40GB", None),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA A40", "a40"),
        ("NVIDIA RTX A6000", "rtx-a6000"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L40", None),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090 D", None),
        ("Tesla V100-SXM2-16GB", None),
        ("cpu", None),
    ],
)
def test_device_names_map_to_profiles(device_name: str, profile: str | None) -> None:
    found = hardware_for_gpu_name(device_name)
    assert (found.name if found else None) == profile
