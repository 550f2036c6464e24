"""Record the golden outputs of Dream's official modeling and generation code on the tiny checkpoint.

Runs once, in a separate transformers 4.x environment (the official code does not import under 5.x); the
project's tests only read what it wrote. Recipe and data layout: tests/data/dream_golden/RECORDING.md.

    PYTHONPATH=/tmp/dream-golden-env python tests/dream_golden/record.py \
        --official /tmp/dream-official --source ZHZisZZ/dllm@<commit>:<dir> \
        --out tests/data/dream_golden

`--official` is a directory holding the official configuration_dream.py, modeling_dream.py and
generation_utils.py (imported as a package of their own, never copied into the project).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for `tests.` imports

from tests.dream_golden.tiny_checkpoint import (  # noqa: E402
    MASK_ID,
    PAD_ID,
    VOCAB_SIZE,
    WEIGHTS_NAME,
    dream_config,
    dream_state_dict,
    state_dict_sha256,
    write_tiny_dream_checkpoint,
)

FORMAT_VERSION = 1
CHECKPOINT_SEED = 0
OFFICIAL_FILES = ("configuration_dream.py", "modeling_dream.py", "generation_utils.py")
OFFICIAL_PACKAGE = "dream_official"
NUM_THREADS = 1  # one thread: the same float reductions on every recording machine
MAX_NEW_TOKENS = 8
STEP_COUNTS = (8, 3)  # steps == max_new_tokens, and fewer steps than tokens (uneven transfers per step)
EPS = 1e-3
ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")
NOISE_STD = 1e-4  # logit noise every golden case must survive unchanged (noise_robustness)
NOISE_SEED = 7

# Prompts use ids 3..254: none is PAD (0), BOS (1), EOS (2) or MASK (255).
PROMPTS: dict[str, tuple[list[list[int]], list[list[int]] | None]] = {
    # a batch of 2 without padding: diffusion_generate gets no attention_mask
    "nopad": ([[17, 42, 99, 7, 230], [61, 5, 188, 140, 33]], None),
    # a batch of 2 of lengths 5 and 3, left-padded with PAD_ID, with its 2-D attention_mask
    "leftpad": (
        [[71, 12, 250, 96, 8], [PAD_ID, PAD_ID, 123, 45, 201]],
        [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]],
    ),
}

# Sampling settings: greedy, and two sampled ones (top-p with a soft alg_temp; top-k, positions by top-k).
SETTINGS: dict[str, dict[str, Any]] = {
    "greedy": {"temperature": 0.0, "top_p": None, "top_k": None, "alg_temp": None},
    "topp": {"temperature": 0.7, "top_p": 0.9, "top_k": None, "alg_temp": 0.5},
    "topk": {"temperature": 1.0, "top_p": None, "top_k": 20, "alg_temp": None},
}

# Forwards whose raw logits are kept: (generation case, forward index).
LOGITS_CAPTURES: dict[str, tuple[str, int]] = {
    "nopad_first": ("maskgit_plus-greedy-steps8-nopad", 0),
    "nopad_last": ("maskgit_plus-greedy-steps8-nopad", 7),
    "leftpad_first": ("maskgit_plus-greedy-steps8-leftpad", 0),
    "leftpad_last": ("maskgit_plus-greedy-steps8-leftpad", 7),
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def import_official(
    directory: Path, files: tuple[str, ...] = OFFICIAL_FILES, package: str = OFFICIAL_PACKAGE,
    module: str = "modeling_dream",
) -> Any:
    """Import the official files as a package of their own (they import each other relatively); its `module`."""
    missing = [name for name in files if not (directory / name).is_file()]
    if missing:
        raise SystemExit(f"--official {directory} lacks {missing}: extract them as RECORDING.md says")
    spec = importlib.util.spec_from_file_location(
        package, directory / "__init__.py", submodule_search_locations=[str(directory)]
    )
    assert spec is not None
    sys.modules[package] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"{package}.{module}")


def load_official_model(model_class: Any, checkpoint: Path) -> torch.nn.Module:
    """The official model class from the tiny checkpoint, checked to hold exactly the file's tensors."""
    model = model_class.from_pretrained(str(checkpoint), torch_dtype=torch.float32).eval()
    on_disk = load_file(str(checkpoint / WEIGHTS_NAME))
    in_model = model.state_dict()
    missing, unexpected = sorted(set(in_model) - set(on_disk)), sorted(set(on_disk) - set(in_model))
    if missing or unexpected:
        raise SystemExit(f"checkpoint does not match {model_class.__name__}: missing {missing}, unexpected {unexpected}")
    for name, tensor in on_disk.items():
        if not torch.equal(in_model[name], tensor):
            raise SystemExit(f"{model_class.__name__}.from_pretrained changed {name}")
    return model


class ForwardCapture:
    """Keeps what the generation loop passed to the model on each forward, and the raw logits it got back."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.calls: list[tuple[torch.Tensor, Any, Any, torch.Tensor]] = []
        model.register_forward_hook(self._hook)

    def _hook(self, _module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        x, attention_mask, tok_idx = args  # _sample calls self(x, attention_mask, tok_idx)
        self.calls.append((x.clone(), attention_mask, tok_idx, output.logits.detach().clone()))


def generation_cases() -> list[dict[str, Any]]:
    """Every (alg, setting, steps, prompt) combination, its seed and the exact diffusion_generate kwargs."""
    cases = []
    for alg in ALGS:
        for setting_name, setting in SETTINGS.items():
            for steps in STEP_COUNTS:
                for prompt_name, (input_ids, attention_mask) in PROMPTS.items():
                    kwargs = {
                        "attention_mask": attention_mask,
                        "max_new_tokens": MAX_NEW_TOKENS,
                        "steps": steps,
                        "eps": EPS,
                        "alg": alg,
                        "mask_token_id": MASK_ID,
                        "output_history": True,
                        "return_dict_in_generate": True,
                        **setting,
                    }
                    cases.append(
                        {
                            "name": f"{alg}-{setting_name}-steps{steps}-{prompt_name}",
                            "alg": alg,
                            "setting": setting_name,
                            "prompt": prompt_name,
                            "seed": 1000 + len(cases),
                            "input_ids": input_ids,
                            "kwargs": kwargs,
                        }
                    )
    return cases


def run_case(model: Any, capture: ForwardCapture, case: dict[str, Any]) -> list[tuple[Any, ...]]:
    """torch.manual_seed(seed), then model.diffusion_generate(input_ids, **kwargs); fills in the outputs."""
    kwargs = dict(case["kwargs"])
    if kwargs["attention_mask"] is not None:
        kwargs["attention_mask"] = torch.tensor(kwargs["attention_mask"], dtype=torch.long)
    input_ids = torch.tensor(case["input_ids"], dtype=torch.long)
    capture.calls.clear()
    torch.manual_seed(case["seed"])
    out = model.diffusion_generate(input_ids, **kwargs)
    case["sequences"] = out.sequences.tolist()
    case["history"] = [step.tolist() for step in out.history]
    case["forwards"] = len(capture.calls)
    case["still_masked"] = int((out.sequences == MASK_ID).sum())
    return list(capture.calls)


def logits_entry(name: str, call: tuple[Any, ...], tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One captured forward: its inputs as the official loop built them, and the raw (unshifted) logits."""
    x, attention_mask, tok_idx, logits = call
    tensors[f"{name}.input_ids"] = x.contiguous()
    tensors[f"{name}.logits"] = logits.contiguous()
    entry: dict[str, Any] = {"name": name, "shape": list(logits.shape)}
    if isinstance(attention_mask, torch.Tensor):
        # _sample passes [B, 1, L, L] bool = outer AND of the 2-D mask; keep the 2-D mask it came from (its
        # diagonal) and the position ids (tok_idx), and check the 4-D one is exactly that outer product.
        mask_2d = attention_mask[:, 0].diagonal(dim1=-2, dim2=-1).long()
        outer = mask_2d[:, None, None, :].bool() & mask_2d[:, None, :, None].bool()
        assert torch.equal(attention_mask, outer)
        tensors[f"{name}.attention_mask"] = mask_2d.contiguous()
        tensors[f"{name}.position_ids"] = tok_idx.clone()
        entry["forward_attention_mask"] = "4d_bool_outer_and"
    else:
        assert attention_mask == "full" and tok_idx is None
        entry["forward_attention_mask"] = "full"
    return entry


def sensitivity(model: Any, tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """How far the logits move when positions or the mask are wrong: what the data can tell apart."""
    x, mask_2d = tensors["leftpad_first.input_ids"], tensors["leftpad_first.attention_mask"]
    mask_4d = mask_2d[:, None, None, :].bool() & mask_2d[:, None, :, None].bool()
    real = mask_2d.bool()
    golden = tensors["leftpad_first.logits"]
    with torch.no_grad():
        arange_positions = model(x, mask_4d, None).logits
        no_mask = model(x, "full", tensors["leftpad_first.position_ids"]).logits
        nopad = tensors["nopad_first.input_ids"]
        batch, length = nopad.shape
        causal_mask = torch.ones(batch, 1, length, length, dtype=torch.bool).tril()
        causal = model(nopad, causal_mask, None).logits
    return {
        "leftpad_positions_arange_max_abs_diff": float((arange_positions - golden)[real].abs().max()),
        "leftpad_no_mask_max_abs_diff": float((no_mask - golden)[real].abs().max()),
        "nopad_causal_max_abs_diff": float((causal - tensors["nopad_first.logits"]).abs().max()),
    }


def noise_robustness(model: Any, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Re-run every case with N(0, NOISE_STD) added to the logits (from a generator of its own, so the global
    stream the sampler draws from is untouched): the cases whose tokens move are too close to a tie for a
    loader whose logits differ from the official ones in float rounding. None should."""
    changed = []
    for case in cases:
        noise = torch.Generator().manual_seed(NOISE_SEED)
        kwargs = dict(case["kwargs"])
        if kwargs["attention_mask"] is not None:
            kwargs["attention_mask"] = torch.tensor(kwargs["attention_mask"], dtype=torch.long)
        kwargs["generation_logits_hook_func"] = lambda _step, _x, logits: logits + NOISE_STD * torch.randn(
            logits.shape, generator=noise
        )
        torch.manual_seed(case["seed"])
        out = model.diffusion_generate(torch.tensor(case["input_ids"], dtype=torch.long), **kwargs)
        if out.sequences.tolist() != case["sequences"]:
            changed.append(case["name"])
    return {"logit_noise_std": NOISE_STD, "changed_cases": changed}


def to_json(value: Any, indent: str = "") -> str:
    """JSON with one level per line but every list of numbers on one line: readable diffs, small files."""
    inner = indent + " "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {to_json(value[k], inner)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}" if items else "{}"
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        if all(isinstance(v, list) and not any(isinstance(w, (dict, list)) for w in v) for v in value):
            return "[" + ", ".join(json.dumps(v, separators=(",", ":")) for v in value) + "]"
        return "[\n" + ",\n".join(inner + to_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, separators=(", ", ":")) if isinstance(value, list) else json.dumps(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True, help="directory with the official files")
    parser.add_argument("--source", required=True, help="where they came from: owner/repo@commit:dir")
    parser.add_argument("--out", type=Path, required=True, help="tests/data/dream_golden")
    args = parser.parse_args(argv)

    import transformers

    if not transformers.__version__.startswith("4."):
        raise SystemExit(f"the official code needs transformers 4.x, this is {transformers.__version__}")
    torch.set_num_threads(NUM_THREADS)
    modeling = import_official(args.official)

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = write_tiny_dream_checkpoint(Path(tmp) / "tiny-dream", seed=CHECKPOINT_SEED)
        weights_sha256 = _sha256(checkpoint / WEIGHTS_NAME)
        model = load_official_model(modeling.DreamModel, checkpoint)

    capture = ForwardCapture(model)
    cases = generation_cases()
    wanted = {case_name for case_name, _ in LOGITS_CAPTURES.values()}
    calls_by_case = {}
    for case in cases:
        calls = run_case(model, capture, case)
        if case["name"] in wanted:
            calls_by_case[case["name"]] = calls

    tensors: dict[str, torch.Tensor] = {}
    logits_cases = []
    for name, (case_name, index) in LOGITS_CAPTURES.items():
        entry = logits_entry(name, calls_by_case[case_name][index], tensors)
        entry.update({"generation_case": case_name, "forward_index": index})
        logits_cases.append(entry)

    golden = {
        "format_version": FORMAT_VERSION,
        "source": {
            "where": args.source,
            "files": {name: _sha256(args.official / name) for name in OFFICIAL_FILES},
        },
        "env": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "num_threads": NUM_THREADS,
            "device": "cpu",
            "dtype": "float32",
            "attention": "sdpa (DreamSdpaAttention, which DreamDecoderLayer always builds)",
        },
        "checkpoint": {
            "builder": "tests/dream_golden/tiny_checkpoint.py:write_tiny_dream_checkpoint",
            "seed": CHECKPOINT_SEED,
            "model_safetensors_sha256": weights_sha256,
            "state_dict_sha256": state_dict_sha256(dream_state_dict(CHECKPOINT_SEED)),
            "config": dream_config(),
            "special_ids": {"pad": PAD_ID, "mask": MASK_ID, "vocab_size": VOCAB_SIZE},
        },
        "logits_cases": logits_cases,
        "sensitivity": sensitivity(model, tensors),
        "robustness": noise_robustness(model, cases),
        "generation_cases": cases,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(args.out / "logits.safetensors"), metadata={"format": "pt"})
    (args.out / "golden.json").write_text(to_json(golden) + "\n")
    print(f"wrote {len(cases)} generation cases and {len(logits_cases)} logits cases to {args.out}")
    print(json.dumps({k: golden[k] for k in ("sensitivity", "robustness")}, indent=1))


if __name__ == "__main__":
    main()
