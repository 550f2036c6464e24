"""The check that a KV cache a run measures was really written: a bypassed cache must fail, not measure.

An attention module that does not receive the cache (a transformers release that renames the keyword it
travels under, say) still produces logits: vanilla-looking ones for a LLaDA cache variant, wrong ones for a
LLaMA decode that attends to its current token alone. Nothing downstream would notice, so a run's speedup
would rest on a cache never filled. The scenario checks every cache after its generation, outside the
timed region (a static cache's length may live on the device).
"""

from __future__ import annotations

import transformers
from transformers.cache_utils import Cache

from workers.errors import WorkerError


class CacheNotWrittenError(WorkerError):
    """A run's KV cache was never written by the model's attention."""


def unwritten_layers(cache: Cache) -> list[int]:
    """Indices of the layers no forward wrote a key or value into."""
    return [index for index, layer in enumerate(cache.layers) if _writes(layer) == 0]


def require_written(cache: Cache | None, kind: str) -> None:
    """Raise `CacheNotWrittenError` naming the cache and its unwritten layers, if any layer was never written."""
    if cache is None:
        return
    unwritten = unwritten_layers(cache)
    if unwritten:
        raise CacheNotWrittenError(
            f"the {kind} KV cache was never written in {len(unwritten)} of {len(cache.layers)} layers "
            f"(first: {unwritten[0]}): the model's attention did not call the cache's update, so this run would "
            f"measure a model without its cache. transformers {transformers.__version__} may pass the cache under a "
            "keyword workers/models/cache_kwarg.py does not know; install the versions in constraints.txt."
        )


def _writes(layer: object) -> int:
    writes = getattr(layer, "writes", None)  # BlockCacheLayer counts its updates (its seq length is an offset)
    return int(writes) if writes is not None else int(layer.get_seq_length())  # type: ignore[attr-defined]
