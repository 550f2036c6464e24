"""The keyword under which transformers' Llama forwards take a KV cache, whichever release is installed.

transformers up to 5.23 names it `past_key_values`; 5.24 renamed it `cache` and maps the old name onto the
new one only at the model's entry points (with a FutureWarning per call). Inside a decoder layer the
attention module then receives `cache=`, so an attention module that reads `past_key_values` alone sees
no cache and silently skips writing it. Callers pass `cache_kwargs(cache)`; attention modules take the
cache with `pop_cache(kwargs)`, which accepts either name.
"""

from __future__ import annotations

import inspect

from transformers.models.llama.modeling_llama import LlamaModel

# inspect.signature follows the deprecation decorator's __wrapped__ to the real parameters.
CACHE_KWARG: str = "cache" if "cache" in inspect.signature(LlamaModel.forward).parameters else "past_key_values"


def cache_kwargs(cache: object) -> dict[str, object]:
    """`{name: cache}` under the installed release's keyword, for a model or attention call."""
    return {CACHE_KWARG: cache}


def find_cache(kwargs: dict[str, object]) -> object | None:
    """The cache in an attention module's keyword arguments, under either name (None: no cache)."""
    new = kwargs.get("cache")
    return new if new is not None else kwargs.get("past_key_values")


def pop_cache(kwargs: dict[str, object]) -> object | None:
    """Remove the cache from an attention module's keyword arguments, under either name, and return it."""
    cache = find_cache(kwargs)
    kwargs.pop("cache", None)
    kwargs.pop("past_key_values", None)
    return cache
