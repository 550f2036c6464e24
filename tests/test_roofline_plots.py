"""Plot data (operator points, latency curves), the figures drawn from it, the CLI's errors and speed tool."""

from __future__ import annotations

import itertools

import pytest

from roofline.cli import main
from roofline.errors import RooflineInputError
from roofline.hardware import get_hardware
from roofline.plotdata import latency_vs_generation_length, operator_points

A100 = get_hardware("a100-sxm4-80gb")


def test_operator_points_cover_the_three_phases_under_their_roofs() -> None:
    points = operator_points(A100, prompt_len=128, gen_len=512)
    assert {p.phase for p in points} == {"llama prefill", "llama decode", "llada step"}
    assert {"qkv/o proj", "up/gate/down", "qk/pv", "lm head", "nonlinear", "sampler"} <= {
        p.group for p in points
    }
    for p in points:
        assert p.arithmetic_intensity == pytest.approx(p.flops / p.bytes_)
        peak = A100.peak_tensor_flops_per_s if p.unit == "tensor" else A100.peak_vector_ops_per_s
        assert p.attainable_flops_per_s == pytest.approx(min(peak, p.arithmetic_intensity * 2039e9))
    decode_ffn = next(p for p in points if p.phase == "llama decode" and p.name == "up_proj")
    assert decode_ffn.arithmetic_intensity == pytest.approx(1.0, abs=1e-3)  # batch 1 decode: ~1 FLOP/byte


def test_study_points_have_no_llada_lm_head() -> None:
    points = operator_points(A100, prompt_len=128, gen_len=512, fidelity="study")
    assert not any(p.phase == "llada step" and p.group in ("lm head", "sampler") for p in points)


def test_latency_curves_both_models_both_fidelities() -> None:
    points = latency_vs_generation_length(A100, [32, 64, 128], prompt_len=128, block_length=32)
    assert len(points) == 3 * 2 * 2
    llada_faithful = [p for p in points if p.arch == "llada" and p.fidelity == "faithful"]
    assert [p.steps for p in llada_faithful] == [32, 64, 128]
    assert all(a.latency_s < b.latency_s for a, b in itertools.pairwise(llada_faithful))
    with pytest.raises(RooflineInputError):
        latency_vs_generation_length(A100, [48], block_length=32)


def test_figures_draw_from_the_data() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from report.figures.roofline import predicted_latency_figure, roofline_plot

    fig = roofline_plot(operator_points(A100, prompt_len=128, gen_len=256), A100)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = ax.get_legend_handles_labels()[1]
    assert "qk/pv · llama decode" in labels and "up/gate/down · llada step" in labels
    latency = predicted_latency_figure(latency_vs_generation_length(A100, [32, 64]), A100)
    assert [a.get_title() for a in latency.axes] == ["study model", "faithful model"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["llama", "--prompt-len", "8", "--gen-len", "8", "--hardware", "tpu"], "allowed: study-a6000"),
        (["llama", "--prompt-len", "8", "--gen-len", "8", "--fidelity", "exact"], "allowed: study, faithful"),
        (["llama", "--prompt-len", "8"], "--gen-len"),
        (
            ["llada", "--prompt-len", "8", "--gen-len", "30", "--block-length", "8", "--steps", "8"],
            "multiple",
        ),
        (["llama", "--prompt-len", "8", "--gen-len", "8", "--preset", "70b"], "allowed: tiny, small, 8b"),
        (["llama", "--prompt-len", "8", "--gen-len", "8", "--batch", "2", "--fidelity", "study"], "faithful"),
        (["mamba"], "invalid choice"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("llada-bench roofline: error: ")
    assert fragment in captured.err


def test_cli_help_and_hardware_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "llada-bench roofline" in capsys.readouterr().out
    assert main(["hardware"]) == 0
    assert "a100-sxm4-80gb: tensor 312 TFLOP/s" in capsys.readouterr().out


def test_cli_synthetic_preset_and_faithful_llada(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "llada",
        "--prompt-len",
        "16",
        "--gen-len",
        "32",
        "--block-length",
        "16",
        "--steps",
        "8",
        "--preset",
        "tiny",
        "--batch",
        "2",
        "--cfg-scale",
        "1",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Block 2: SeqLen=48," in out
    assert "CFG: on (scale 1, model batch 4)" in out


def test_bench_main_prints_microseconds(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.bench import main as bench_main

    assert bench_main(["--repeats", "1"]) == 0
    assert "us/evaluation" in capsys.readouterr().out
