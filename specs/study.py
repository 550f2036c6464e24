"""The study's design (../shared/study/report-draft.md, sections 3.1.4 and 4) as data: each control with its
section and value, so that every report can set its sweep beside the study and a spec can say why it departs.

The values are the study's own words, encoded once; `report/analysis/departures.py` compares a sweep with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What a spec's `departures:` may explain, one key per control below.
ControlKey = Literal["models", "lengths", "split", "steps", "batch_sizes", "output_tokens", "warmup", "temperature",
                     "hardware", "software", "precision", "attention", "s_parity", "quality_reference"]

# 4.1.1: the two architectures, by their checkpoints' names.
MODELS = ("Meta-Llama-3-8B", "LLaDA-8B")
# 4.1.2 (4.4's summary: 32, 64, 128).
STEPS = (16, 32, 64, 128, 256)
# 4.1.3 (4.4's summary: 1, 8, 32).
BATCH_SIZES = (1, 4, 8, 16, 32, 64)
# 4.1.4: total tokens, prompt and generation in a fixed ratio, "e.g. 50% prompt, 50% generation" (4.4: 512-2048).
SEQUENCE_LENGTHS = (128, 512, 1024, 2048)
PROMPT_FRACTION = 0.5
# 4.2.1: one A100 80GB (PCIe or SXM), the node to itself; the CUDA name holds both words.
GPU_NAME_PARTS = ("A100", "80GB")
# 4.2.2
DTYPE = "bfloat16"
# 4.2.4: "Python 3.13.2, PyTorch 2.4+, CUDA 12.6"; FlashAttention-2 for both models (or for neither).
PYTHON = "3.13.2"
TORCH_AT_LEAST = (2, 4)
CUDA = "12.6"
ATTENTION = "flash_attention_2"
# 4.3.1
WARMUP = 3
# 4.3.2: "0 (greedy decoding) or a fixed small value (e.g. 0.1)".
MAX_TEMPERATURE = 0.1


@dataclass(frozen=True)
class StudyControl:
    key: ControlKey
    label: str
    section: str  # of report-draft.md
    study: str  # the study's value, in its words


CONTROLS: tuple[StudyControl, ...] = (
    StudyControl("models", "models (A)", "4.1.1", f"{MODELS[0]} vs {MODELS[1]}, their checkpoints"),
    StudyControl("lengths", "sequence length N (prompt + generation)",
                 "4.1.4", f"{', '.join(map(str, SEQUENCE_LENGTHS))} tokens (§4.4: 512, 1024, 2048)"),
    StudyControl("split", "prompt / generation split", "4.1.4",
                 f"{PROMPT_FRACTION:.0%} prompt, {1 - PROMPT_FRACTION:.0%} generation"),
    StudyControl("steps", "diffusion steps K", "4.1.2", f"{', '.join(map(str, STEPS))} (§4.4: 32, 64, 128)"),
    StudyControl("batch_sizes", "batch size B", "4.1.3", f"{', '.join(map(str, BATCH_SIZES))} (§4.4: 1, 8, 32)"),
    StudyControl("output_tokens", "output tokens N_out", "4.2.3", "exactly N_out for both models"),
    StudyControl("warmup", "warm-up passes W", "4.3.1", f"{WARMUP}, discarded"),
    StudyControl("temperature", "sampling temperature T", "4.3.2",
                 f"0 (greedy) or a fixed small value (e.g. {MAX_TEMPERATURE:g})"),
    StudyControl("hardware", "hardware H", "4.2.1", "one NVIDIA A100 80GB (PCIe or SXM), exclusive node"),
    StudyControl("software", "software stack S", "4.2.4",
                 f"Python {PYTHON}, PyTorch {'.'.join(map(str, TORCH_AT_LEAST))}+, CUDA {CUDA}"),
    StudyControl("precision", "precision P", "4.2.2", DTYPE),
    StudyControl("attention", "attention kernel", "4.2.4", "FlashAttention-2 for both models"),
    StudyControl("s_parity", "S_parity", "3.1.4", "min{k : f_llada(k) ≥ Q_llama}"),
    StudyControl("quality_reference", "quality reference Q_llama", "3.1.4, §4.3.2",
                 "the autoregressive model's own text at T = 0 (greedy), on every metric"),
)
