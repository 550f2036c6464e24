"""Record the golden outputs of Fast-dLLM v2's official `generate` on the tiny checkpoint.

Runs once, in a separate transformers 4.x environment (the official code does not import under 5.x); the
project's tests only read what it wrote. Recipe and data layout: tests/data/fast_dllm_golden/RECORDING.md.

    PYTHONPATH=/tmp/fast-dllm-golden-env python tests/fast_dllm_golden/record.py \
        --official /tmp/fast-dllm-official --source <owner/repo@commit:dir> --out tests/data/fast_dllm_golden

`--official` is a directory holding the official configuration.py and modeling.py (imported as a package of
their own, never copied into the project).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for `tests.` imports

from tests.dream_golden.record import _sha256, import_official, load_official_model, to_json  # noqa: E402
from tests.fast_dllm_golden.cases import NO_STOP, generation_cases  # noqa: E402
from tests.fast_dllm_golden.tiny_checkpoint import (  # noqa: E402
    MASK_ID,
    STOP_ID,
    VOCAB_SIZE,
    WEIGHTS_NAME,
    fast_dllm_config,
    fast_dllm_state_dict,
    state_dict_sha256,
    write_tiny_fast_dllm_checkpoint,
)

FORMAT_VERSION = 1
CHECKPOINT_SEED = 0
OFFICIAL_FILES = ("configuration.py", "modeling.py")
OFFICIAL_PACKAGE = "fast_dllm_official"
NUM_THREADS = 1  # one thread: the same float reductions on every recording machine
NOISE_STD = 1e-4  # logit noise every golden case must survive unchanged (noise_robustness)
NOISE_SEED = 7


class ForwardLog:
    """`generate` calls `self.forward(...)` (no hook fires): the instance attribute shadows it, logs what each call
    fed and how, and may add logit noise from a generator of its own."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.calls: list[list[Any]] = []
        self.noise: torch.Generator | None = None
        self._forward = model.forward
        model.forward = self  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # [fed positions, whether the prefix cache grows (prefill, completion), the sub-block's offset or None]
        self.calls.append([int(kwargs["input_ids"].shape[1]), bool(kwargs.get("update_past_key_values")),
                           kwargs.get("replace_position")])
        out = self._forward(*args, **kwargs)
        if self.noise is not None:
            out.logits = out.logits + NOISE_STD * torch.randn(out.logits.shape, generator=self.noise)
        return out


def run_case(model: Any, log: ForwardLog, case: dict[str, Any]) -> list[list[int]]:
    """torch.manual_seed(seed), then model.generate(input_ids, **kwargs): the returned sequences."""
    log.calls.clear()
    torch.manual_seed(case["seed"])
    out = model.generate(torch.tensor(case["input_ids"]), **case["kwargs"])
    return out.tolist()


def choose_stop(model: Any, log: ForwardLog, case: dict[str, Any]) -> int:
    """An EOS case's stop token: the last row's generated token at the first position from `stop_at` on whose token
    no other row generates up to that position, so the stop is met in the last row first."""
    probe = dict(case, kwargs={**case["kwargs"], "stop_token": NO_STOP})
    rows = run_case(model, log, probe)
    start = len(case["input_ids"][0])
    for position in range(start + case["stop_at"], len(rows[-1])):
        token = rows[-1][position]
        if token != MASK_ID and all(token not in row[start : position + 1] for row in rows[:-1]):
            return token
    raise SystemExit(f"{case['name']}: no token of the last row is met there first; choose another stop_at")


def noise_robustness(model: Any, log: ForwardLog, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Re-run every case with N(0, NOISE_STD) added to every forward's logits: the cases whose tokens or forwards
    move are too close to a tie (of two tokens, or of a confidence and the threshold) for a loader whose logits
    differ from the official ones in float rounding. None should."""
    changed = []
    for case in cases:
        log.noise = torch.Generator().manual_seed(NOISE_SEED)
        if run_case(model, log, case) != case["sequences"] or log.calls != case["forward_log"]:
            changed.append(case["name"])
    log.noise = None
    return {"logit_noise_std": NOISE_STD, "changed_cases": changed}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True, help="directory with the official files")
    parser.add_argument("--source", required=True, help="where they came from: owner/repo@commit:dir")
    parser.add_argument("--out", type=Path, required=True, help="tests/data/fast_dllm_golden")
    args = parser.parse_args(argv)

    import transformers

    if not transformers.__version__.startswith("4."):
        raise SystemExit(f"the official code needs transformers 4.x, this is {transformers.__version__}")
    torch.set_num_threads(NUM_THREADS)
    modeling = import_official(args.official, OFFICIAL_FILES, OFFICIAL_PACKAGE, "modeling")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = write_tiny_fast_dllm_checkpoint(Path(tmp) / "tiny", seed=CHECKPOINT_SEED, tokenizer=False)
        weights_sha256 = _sha256(checkpoint / WEIGHTS_NAME)
        model = load_official_model(modeling.Fast_dLLM_QwenForCausalLM, checkpoint)

    log = ForwardLog(model)
    cases = generation_cases()
    for case in cases:
        if "stop_at" in case:
            case["kwargs"]["stop_token"] = choose_stop(model, log, case)
        case["sequences"] = run_case(model, log, case)
        case["forward_log"] = [list(call) for call in log.calls]
        case["forwards"] = len(log.calls)
    golden = {
        "format_version": FORMAT_VERSION,
        "source": {"where": args.source, "files": {name: _sha256(args.official / name) for name in OFFICIAL_FILES}},
        "env": {
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "num_threads": NUM_THREADS, "device": "cpu",
            "dtype": "float32", "attention": "sdpa (Fast_dLLM_QwenAttention calls it whatever the config says)",
        },
        "checkpoint": {
            "builder": "tests/fast_dllm_golden/tiny_checkpoint.py:write_tiny_fast_dllm_checkpoint",
            "seed": CHECKPOINT_SEED,
            "model_safetensors_sha256": weights_sha256,
            "state_dict_sha256": state_dict_sha256(fast_dllm_state_dict(CHECKPOINT_SEED)),
            "config": fast_dllm_config(),
            "special_ids": {"mask": MASK_ID, "stop": STOP_ID, "no_stop": NO_STOP, "vocab_size": VOCAB_SIZE},
        },
        "robustness": noise_robustness(model, log, cases),
        "generation_cases": cases,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "golden.json").write_text(to_json(golden) + "\n")
    print(f"wrote {len(cases)} generation cases to {args.out}")
    print(json.dumps(golden["robustness"], indent=1))


if __name__ == "__main__":
    main()
