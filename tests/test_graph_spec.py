"""The graph options in the spec: what they switch on, and the mistakes that name their field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specs.schema import LladaImpl, LlamaImpl


def test_graph_is_an_accelerated_llada_variant_that_vanilla_cannot_name() -> None:
    assert LladaImpl(name="g", graph=True).is_accelerated
    assert not LladaImpl(name="g", graph=True).parallel  # its forwards follow the schedule
    with pytest.raises(ValidationError, match="name: 'vanilla' names the plain sampler"):
        LladaImpl(graph=True)


def test_live_decode_attention_needs_compile() -> None:
    assert LlamaImpl(name="c", compile=True, decode_attention="live").decode_attention == "live"
    assert LlamaImpl(name="c", compile=True).decode_attention == "static"
    with pytest.raises(ValidationError, match="decode_attention: 'live' is the compiled decode step's attention"):
        LlamaImpl(name="c", decode_attention="live")
    with pytest.raises(ValidationError, match="decode_attention"):
        LlamaImpl(name="c", compile=True, decode_attention="flash")
