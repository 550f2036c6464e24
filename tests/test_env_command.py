"""`llada-bench env` on a CPU machine: the record says there is no GPU, and requirements that cannot be met
here fail with one line per missing capability."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from specs.results import Environment
from workers import env_command
from workers.env_command import CLAIMS_ENV, EXIT_MISSING, EXIT_OK, EXIT_USAGE, main

CPU_ONLY = not torch.cuda.is_available()
needs_cpu_only = pytest.mark.skipif(not CPU_ONLY, reason="checks what a GPU-less machine reports")


@pytest.fixture(autouse=True)
def _no_image(monkeypatch):
    monkeypatch.delenv(CLAIMS_ENV, raising=False)
    monkeypatch.delenv("LLADA_BENCH_IMAGE", raising=False)


@needs_cpu_only
def test_plain_record_reports_no_gpu_and_succeeds(capsys) -> None:
    assert main([]) == EXIT_OK
    out = capsys.readouterr().out
    lines = dict(
        line.split(None, 1) for line in out.splitlines() if line and not line.startswith(" ") and " " in line
    )
    assert lines["device"].strip() == "cpu"
    assert lines["gpu_count"].strip() == "0"
    assert lines["torch"].strip() == torch.__version__
    assert "cuda        no" in out  # every capability is reported, none is required


@needs_cpu_only
def test_json_is_exactly_the_environment_record(capsys, monkeypatch) -> None:
    monkeypatch.setenv("LLADA_BENCH_IMAGE", "llada-bench:test")
    assert main(["--json"]) == EXIT_OK
    record = Environment.model_validate_json(capsys.readouterr().out)
    # cuda is the CUDA version torch was built for: None for the CPU wheel, 12.6 for the image's torch on a CPU
    assert record.device == "cpu" and record.gpu_count == 0 and record.cuda == torch.version.cuda
    assert record.image_digest == "llada-bench:test"


@needs_cpu_only
@pytest.mark.parametrize(
    "argv, missing",
    [
        (["--require-cuda"], ["cuda"]),
        (["--require-bf16"], ["bf16"]),
        (["--require", "cuda,bf16,flash_attn"], ["cuda", "bf16", "flash_attn"]),
        (["--require", "flash-attn", "--require-cuda"], ["flash_attn", "cuda"]),
    ],
)
def test_unmet_requirements_fail_with_a_line_each(capsys, argv, missing) -> None:
    assert main(argv) == EXIT_MISSING
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in err] == missing
    assert all(line.startswith("missing: ") and len(line) > 30 for line in err)


@needs_cpu_only
def test_require_image_checks_the_claims_the_image_sets(capsys, monkeypatch) -> None:
    monkeypatch.setenv(CLAIMS_ENV, "cuda,bf16,flash_attn")
    assert main(["--json", "--require-image"]) == EXIT_MISSING
    captured = capsys.readouterr()
    assert Environment.model_validate_json(captured.out).device == "cpu"  # stdout stays the bare record
    assert "missing: cuda: torch" in captured.err
    assert {line.split(":")[1].strip() for line in captured.err.splitlines()} == {
        "cuda",
        "bf16",
        "flash_attn",
    }


def test_require_image_claiming_nothing_passes(monkeypatch) -> None:
    monkeypatch.setenv(CLAIMS_ENV, "")
    assert main(["--require-image"]) == EXIT_OK


def test_require_image_outside_the_image_is_a_usage_error(capsys) -> None:
    assert main(["--require-image"]) == EXIT_USAGE
    assert f"{CLAIMS_ENV} is not set" in capsys.readouterr().err


@pytest.mark.parametrize("argv, env", [(["--require", "cuda,tpu"], None), (["--require-image"], "cuda,fp8")])
def test_unknown_capability_names_the_allowed_ones(capsys, monkeypatch, argv, env) -> None:
    if env is not None:
        monkeypatch.setenv(CLAIMS_ENV, env)
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "unknown capability" in err and "allowed: cuda, bf16, flash_attn" in err


def _fake_gpu(monkeypatch, capability: tuple[int, int], name: str) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: name)


def test_bf16_needs_ampere_and_says_which_gpu_lacks_it(monkeypatch) -> None:
    _fake_gpu(monkeypatch, (7, 0), "Tesla V100-SXM2-32GB")
    check = env_command.check_bf16()
    assert not check.ok and "Tesla V100" in check.detail and "7.0" in check.detail and "8.0" in check.detail
    _fake_gpu(monkeypatch, (8, 0), "NVIDIA A100-SXM4-80GB")
    assert env_command.check_bf16().ok
    assert env_command.check_cuda().ok and "A100" in env_command.check_cuda().detail


def test_cuda_build_without_a_visible_gpu_points_at_the_container_flags(monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    check = env_command.check_cuda()
    assert not check.ok and "--nv" in check.detail and "--gpus all" in check.detail


def test_flash_attn_installed_but_broken_is_reported(monkeypatch) -> None:
    monkeypatch.setattr(env_command.importlib.metadata, "version", lambda name: "2.8.3")
    broken = SimpleNamespace()  # a module without flash_attn_func: the import fails like a bad ABI would
    monkeypatch.setitem(sys.modules, "flash_attn", broken)
    check = env_command.check_flash_attn()
    assert not check.ok and "2.8.3 is installed but does not import" in check.detail


def test_cli_delegates_env_and_exits_with_its_status() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator.cli",
            "env",
            "--json",
            "--require",
            "cuda" if CPU_ONLY else "bf16,cuda",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    record = json.loads(done.stdout)
    assert record["python"] and record["torch"] == torch.__version__
    assert done.returncode == (EXIT_MISSING if CPU_ONLY else EXIT_OK), done.stderr


def test_health_check_touches_no_gpu(capsys, monkeypatch) -> None:
    """The Docker HEALTHCHECK runs every 10 minutes beside a sweep: it must create no CUDA context and run
    no kernel (it would share an `exclusive: true` GPU and perturb its timings)."""
    touched: list[str] = []

    def forbidden(name):
        def call(*args, **kwargs):
            touched.append(name)
            raise AssertionError(f"the health check called torch.cuda.{name}")

        return call

    for name in ("is_available", "device_count", "get_device_name", "get_device_capability", "synchronize", "init",
                 "current_device", "get_device_properties"):
        monkeypatch.setattr(torch.cuda, name, forbidden(name))
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    monkeypatch.setattr(env_command.importlib.metadata, "version", lambda name: "2.8.3")
    monkeypatch.setitem(sys.modules, "flash_attn", SimpleNamespace(flash_attn_func=lambda *a, **k: None))
    monkeypatch.setattr(env_command, "capture_environment", forbidden("capture_environment (NVML opens a context)"))
    monkeypatch.setenv(CLAIMS_ENV, "cuda,bf16,flash_attn")
    assert main(["--require-image", "--no-device"]) == EXIT_OK
    out = capsys.readouterr().out
    assert touched == []
    assert "cuda        yes" in out and "flash_attn  yes" in out and "bf16        --   not checked" in out
    monkeypatch.setattr(torch.version, "cuda", None)
    assert main(["--require-image", "--no-device"]) == EXIT_MISSING and touched == []
