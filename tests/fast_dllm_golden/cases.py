"""The cases the golden data records: official `generate` calls over block and sub-block sizes, thresholds, prompt
lengths against the block, batch sizes, the sub-block cache, sampling, short generations and stop tokens.

Shared by the recording (tests/fast_dllm_golden/record.py) and the project's comparison, which checks that the
recorded cases are exactly these.
"""

from __future__ import annotations

from typing import Any

from tests.fast_dllm_golden.tiny_checkpoint import MASK_ID, VOCAB_SIZE

NO_STOP = VOCAB_SIZE  # a stop token outside the vocabulary: never generated, so no stop rule ever fires
SEED_BASE = 2000


def prompt(batch: int, length: int, salt: int = 0) -> list[list[int]]:
    """A fixed batch of ids in 3..252: none is PAD (0), BOS (1), the stop token (2) or MASK (255)."""
    return [[(i * 37 + row * 101 + salt * 13 + 11) % 250 + 3 for i in range(length)] for row in range(batch)]


def _case(name: str, *, batch: int = 2, prompt_length: int, block: int, sub_block: int, threshold: float,
          block_cache: bool, max_new: int | None = None, temperature: float = 0.0, top_p: float = 0.95,
          salt: int = 0, stop_at: int | None = None) -> dict[str, Any]:  # fmt: skip
    case: dict[str, Any] = {
        "name": name,
        "input_ids": prompt(batch, prompt_length, salt),
        # EXACTLY what generate gets besides input_ids (an EOS case's stop_token is chosen when recording).
        "kwargs": {
            "max_new_tokens": 2 * block + 3 if max_new is None else max_new, "mask_id": MASK_ID,
            "threshold": threshold, "small_block_size": sub_block, "block_size": block, "stop_token": NO_STOP,
            "top_p": top_p, "temperature": temperature, "use_block_cache": block_cache,
        },
    }
    if stop_at is not None:
        case["stop_at"] = stop_at  # the generated position of the last row whose token becomes the stop token
    return case


def generation_cases() -> list[dict[str, Any]]:
    """Every case with its seed (`torch.manual_seed(seed)` right before the call)."""
    cases = []
    # Each (block, sub-block) against prompts shorter than a block, longer and not a multiple, a multiple, and
    # exactly one block; one token per forward (threshold 1) and several (0.7, 0.3); with and without the
    # sub-block cache. 2 blocks and 3 tokens asked for: max_new_tokens // block blocks run.
    for block, sub_block, multiple in ((8, 4, 16), (8, 8, 24), (16, 4, 32)):
        for prompt_length in (5, block + 3, multiple, block):
            for threshold in (1.0, 0.7, 0.3):
                if prompt_length == block and threshold == 1.0:
                    # The official forward drops a one-block prompt, so its first forward sees only masks: every
                    # position gets the same confidence up to float rounding, and one token per forward picks among
                    # them by that rounding. A threshold under that confidence commits them all at once.
                    continue
                for block_cache in (False, True):
                    name = f"b{block}s{sub_block}-p{prompt_length}-t{threshold:g}-{'cache' if block_cache else 'nocache'}"
                    cases.append(_case(name, prompt_length=prompt_length, block=block, sub_block=sub_block,
                                       threshold=threshold, block_cache=block_cache))
    # The official defaults (block 32, sub-block 8), one and three rows.
    for batch in (1, 3):
        for block_cache in (False, True):
            cases.append(_case(f"b32s8-p40-t0.9-B{batch}-{'cache' if block_cache else 'nocache'}", batch=batch,
                               prompt_length=40, block=32, sub_block=8, threshold=0.9, block_cache=block_cache,
                               max_new=64))
    # A block of 64: the in-block forwards mask at the forward's default block of 32 (generate does not pass its own).
    for prompt_length in (10, 70):
        for block_cache in (False, True):
            cases.append(_case(f"b64s16-p{prompt_length}-t0.5-{'cache' if block_cache else 'nocache'}",
                               prompt_length=prompt_length, block=64, sub_block=16, threshold=0.5,
                               block_cache=block_cache, max_new=128))
    # Fewer new tokens than a block: no block runs; a prompt that is a multiple of the block still gets its
    # prefill's next token.
    for prompt_length in (16, 13):
        cases.append(_case(f"b8s4-p{prompt_length}-short", prompt_length=prompt_length, block=8, sub_block=4,
                           threshold=1.0, block_cache=False, max_new=5))
    # Sampling (temperature > 0, top-p): the official draw samples row 0 only, so one row.
    for threshold in (1.0, 0.5):
        for block_cache in (False, True):
            cases.append(_case(f"b8s4-p11-t{threshold:g}-sampled-{'cache' if block_cache else 'nocache'}", batch=1,
                               prompt_length=11, block=8, sub_block=4, threshold=threshold, block_cache=block_cache,
                               temperature=0.7, top_p=0.9, max_new=24))
    # A stop token met in the last row: how it ends every row, and where the sequences are cut.
    for batch, threshold, block_cache, stop_at in ((2, 1.0, False, 9), (2, 0.5, True, 6), (3, 0.7, False, 12),
                                                   (1, 1.0, True, 4)):
        cases.append(_case(f"b8s4-p11-t{threshold:g}-B{batch}-eos{stop_at}-{'cache' if block_cache else 'nocache'}",
                           batch=batch, prompt_length=11, block=8, sub_block=4, threshold=threshold,
                           block_cache=block_cache, max_new=32, salt=batch, stop_at=stop_at))
    for index, case in enumerate(cases):
        case["seed"] = SEED_BASE + index
    return cases
