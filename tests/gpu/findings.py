"""What the GPU tests measure, printed and (with LLADA_GPU_FINDINGS set) appended as JSON lines to a file that
`container/gpu-tests.sh` carries back: the numbers a lease produced, beside the pass/fail."""

from __future__ import annotations

import json
import os
from typing import Any

import torch

CUDA = torch.device("cuda", 0)
FINDINGS_ENV = "LLADA_GPU_FINDINGS"


def record_finding(name: str, **values: Any) -> None:
    line = json.dumps({"finding": name, "device": torch.cuda.get_device_name(CUDA), **values})
    print(line)
    path = os.environ.get(FINDINGS_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
