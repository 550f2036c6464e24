"""Golden tests: the study's printed analyses (shared/study/roofline-examples.txt), reproduced byte for byte
through the text CLI in `study` fidelity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.cli import main

EXAMPLES_FILE = Path(__file__).resolve().parents[2] / "shared" / "study" / "roofline-examples.txt"

LLAMA_2048_0 = """\
--- Total Runtime Breakdown ---
Total Runtime: 0.148951 s
  - FFN Linear Layers: 0.095190 s (63.91%)
  - MHA Linear Layers: 0.022664 s (15.22%)
  - MHA Attention: 0.008464 s (5.68%)
  - Nonlinear Ops: 0.021265 s (14.28%)
  - Classifier: 0.001368 s (0.92%)

--- Prefill (Prompt) Phase Analysis ---
Total: 0.148951 s
Linear AI: 1110.3567
Attention AI: 1529.7000
Aggregate AI: 708.9658
"""

LLAMA_2048_1 = """\
--- Total Runtime Breakdown ---
Total Runtime: 0.168864 s
  - FFN Linear Layers: 0.109875 s (65.07%)
  - MHA Linear Layers: 0.026162 s (15.49%)
  - MHA Attention: 0.008815 s (5.22%)
  - Nonlinear Ops: 0.021276 s (12.60%)
  - Classifier: 0.002737 s (1.62%)

--- Prefill (Prompt) Phase Analysis ---
Total: 0.148951 s
Linear AI: 1110.3567
Attention AI: 1529.7000
Aggregate AI: 708.9658

--- Decode (Generation) Phase Analysis ---
Total: 0.019913 s
Linear AI: 0.9996
Attention AI: 3.9922
Aggregate AI: 1.0519
"""

LLADA_128_32_K32_S16 = """\
==================================================
LLaDA Theoretical Performance Analysis
==================================================
Mode: Non-Semi-Autoregressive
Prompt: 128, Generation: 32, Total Steps: 16
Blocks: 1, Block Length: 32, Steps per Block: 16

--- Block-by-Block Analysis ---
Block 1: SeqLen=160, Time/Step=21.0764 ms, Steps=16

--------------------------------------------------
--- Total Generation Analysis ---
Total Estimated Runtime: 337.2217 ms
Final Aggregate Arithmetic Intensity (AI): 138.8347
"""

LLAMA_160_0 = """\
--- Total Runtime Breakdown ---
Total Runtime: 0.022417 s
  - FFN Linear Layers: 0.015417 s (68.77%)
  - MHA Linear Layers: 0.003850 s (17.18%)
  - MHA Attention: 0.000137 s (0.61%)
  - Nonlinear Ops: 0.001645 s (7.34%)
  - Classifier: 0.001368 s (6.10%)

--- Prefill (Prompt) Phase Analysis ---
Total: 0.022417 s
Linear AI: 140.9876
Attention AI: 113.7000
Aggregate AI: 130.5025
"""

LLADA_128_512_K128_S256 = """\
==================================================
LLaDA Theoretical Performance Analysis
==================================================
Mode: Semi-Autoregressive
Prompt: 128, Generation: 512, Total Steps: 256
Blocks: 4, Block Length: 128, Steps per Block: 64

--- Block-by-Block Analysis ---
Block 1: SeqLen=256, Time/Step=22.8178 ms, Steps=64
Block 2: SeqLen=384, Time/Step=26.4426 ms, Steps=64
Block 3: SeqLen=512, Time/Step=35.2607 ms, Steps=64
Block 4: SeqLen=640, Time/Step=44.0926 ms, Steps=64

--------------------------------------------------
--- Total Generation Analysis ---
Total Estimated Runtime: 8231.2754 ms
Final Aggregate Arithmetic Intensity (AI): 315.4992
"""

# (the study's command line, our CLI arguments, the study's printout)
GOLDEN = [
    (
        "run_llama_roofline_model.py --input_prompt_length=2048 --sequence_length=0",
        ["llama", "--prompt-len", "2048", "--gen-len", "0"],
        LLAMA_2048_0,
    ),
    (
        "run_llama_roofline_model.py --input_prompt_length=2048 --sequence_length=1",
        ["llama", "--prompt-len", "2048", "--gen-len", "1"],
        LLAMA_2048_1,
    ),
    (
        "run_llada_roofline_model.py --input_prompt_length=128 --sequence_length=32 --block_length=32 --steps=16",
        ["llada", "--prompt-len", "128", "--gen-len", "32", "--block-length", "32", "--steps", "16"],
        LLADA_128_32_K32_S16,
    ),
    (
        "run_llama_roofline_model.py --input_prompt_length=160 --sequence_length=0",
        ["llama", "--prompt-len", "160", "--gen-len", "0"],
        LLAMA_160_0,
    ),
    (
        "run_llada_roofline_model.py --input_prompt_length=128 --sequence_length=512 --block_length=128 --steps=256",
        ["llada", "--prompt-len", "128", "--gen-len", "512", "--block-length", "128", "--steps", "256"],
        LLADA_128_512_K128_S256,
    ),
]


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


@pytest.mark.parametrize(
    ("study_command", "argv", "expected"), GOLDEN, ids=[g[0].split(" ", 1)[1] for g in GOLDEN]
)
def test_study_fidelity_reproduces_the_printout_byte_for_byte(
    capsys: pytest.CaptureFixture[str], study_command: str, argv: list[str], expected: str
) -> None:
    out = _run(capsys, [*argv, "--fidelity", "study", "--hardware", "study-a6000"])
    assert out == expected


@pytest.mark.parametrize(
    ("study_command", "argv", "expected"), GOLDEN, ids=[g[0].split(" ", 1)[1] for g in GOLDEN]
)
def test_study_fidelity_defaults_to_the_study_hardware(
    capsys: pytest.CaptureFixture[str], study_command: str, argv: list[str], expected: str
) -> None:
    assert _run(capsys, [*argv, "--fidelity", "study"]) == expected


def _blocks_of_examples_file(text: str) -> dict[str, str]:
    """The examples file: '* ...(python <command>)' then the printout up to a blank-line gap or heading."""
    blocks: dict[str, str] = {}
    command, lines = None, []
    for line in [*text.splitlines(), "* end(python end)"]:
        if line.startswith(("* ", "# ")):
            if command is not None:
                while lines and not lines[-1]:
                    lines.pop()
                blocks[command] = "\n".join(lines) + "\n"
            command = (
                line[line.index("python ") + len("python ") :].rstrip(")") if line.startswith("* ") else None
            )
            lines = []
        elif command is not None:
            lines.append(line)
    return blocks


@pytest.mark.skipif(
    not EXAMPLES_FILE.exists(), reason="the study folder is not checked out beside this repository"
)
def test_embedded_goldens_are_the_examples_file() -> None:
    """Guards the transcription above: every printout in the study's file, and no other."""
    blocks = _blocks_of_examples_file(EXAMPLES_FILE.read_text())
    assert blocks == {command: expected for command, _, expected in GOLDEN}


def test_faithful_output_adds_lines_after_the_study_layout(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, ["llama", "--prompt-len", "2048", "--gen-len", "1", "--hardware", "study-a6000"])
    assert out.startswith("--- Total Runtime Breakdown ---\nTotal Runtime: ")
    assert "--- Faithful Model (beyond the study) ---" in out
    # Generating one token needs no decode pass: the prefill's logits give it.
    assert "--- Decode (Generation) Phase Analysis ---" not in out


def test_llama_json_matches_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(
        _run(capsys, ["llama", "--prompt-len", "2048", "--gen-len", "1", "--fidelity", "study", "--json"])
    )
    assert set(doc) >= {"total_s", "breakdown_s", "prefill", "decode", "flops", "bytes"}
    assert set(doc["breakdown_s"]) == {"ffn_linear", "mha_linear", "mha_attention", "nonlinear", "classifier"}
    for phase in ("prefill", "decode"):
        assert set(doc[phase]) == {"total_s", "linear_ai", "attention_ai", "aggregate_ai"}
    assert f"{doc['total_s']:.6f}" == "0.168864"
    assert f"{doc['breakdown_s']['classifier']:.6f}" == "0.002737"
    assert f"{doc['prefill']['linear_ai']:.4f}" == "1110.3567"
    assert f"{doc['decode']['total_s']:.6f}" == "0.019913"
    assert f"{doc['decode']['aggregate_ai']:.4f}" == "1.0519"
    assert isinstance(doc["flops"], int) and isinstance(doc["bytes"], int)
    assert doc["total_s"] == pytest.approx(sum(doc["breakdown_s"].values()))


def test_llama_json_decode_is_null_without_decode(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(
        _run(capsys, ["llama", "--prompt-len", "160", "--gen-len", "0", "--fidelity", "study", "--json"])
    )
    assert doc["decode"] is None
    assert f"{doc['prefill']['aggregate_ai']:.4f}" == "130.5025"


def test_llada_json_matches_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["llada", "--prompt-len", "128", "--gen-len", "512", "--block-length", "128", "--steps", "256"]
    doc = json.loads(_run(capsys, [*argv, "--fidelity", "study", "--json"]))
    assert set(doc) >= {
        "mode",
        "num_blocks",
        "steps_per_block",
        "blocks",
        "total_s",
        "aggregate_ai",
        "flops",
        "bytes",
    }
    assert doc["mode"] == "Semi-Autoregressive"
    assert (doc["num_blocks"], doc["steps_per_block"]) == (4, 64)
    assert [b["seq_len"] for b in doc["blocks"]] == [256, 384, 512, 640]
    assert [f"{b['time_per_step_s'] * 1e3:.4f}" for b in doc["blocks"]] == [
        "22.8178",
        "26.4426",
        "35.2607",
        "44.0926",
    ]
    assert all(set(b) == {"seq_len", "time_per_step_s", "steps"} and b["steps"] == 64 for b in doc["blocks"])
    assert f"{doc['total_s'] * 1e3:.4f}" == "8231.2754"
    assert f"{doc['aggregate_ai']:.4f}" == "315.4992"
