"""What LLaDA's official sampler does with the logits each step: its elementwise work and its float64 buffers.

From ML-GSAI/LLaDA generate.py: with CFG, `un_logits + (cfg + 1) * (logits - un_logits)`; Gumbel noise in
float64 when the temperature is above 0 (the current generate.py also takes that path at temperature 0, where
it changes nothing but the cost; earlier versions and this model return the logits unchanged); `argmax` over
the vocabulary; for low-confidence remasking `softmax(logits.to(float64))`. Top-k, `where` and the gathers
work on [batch, seq] only and are not modelled.
"""

from __future__ import annotations

from roofline.operators import Operator, elementwise
from roofline.workload import Workload
from specs.shapes import ModelShape
FLOAT64_BYTES = 8
_F64_UNARY = 2 * FLOAT64_BYTES
_F64_BINARY = 3 * FLOAT64_BYTES


def sampler_operators(shape: ModelShape, work: Workload, *, seq_len: int) -> tuple[Operator, ...]:
    """The sampler's ops over the [batch, seq_len, vocab] logits of one step, one op per element each; the
    logits take `work.element_bytes` each (the run's dtype), the sampler's own buffers float64."""
    rows, vocab, element_bytes = work.batch * seq_len, shape.vocab_size, work.element_bytes
    unary, binary, cast_to_f64 = 2 * element_bytes, 3 * element_bytes, element_bytes + FLOAT64_BYTES

    def op(name: str, bytes_per_element: int) -> Operator:
        return elementwise(name, "sampler", rows, vocab, bytes_per_element=bytes_per_element)

    ops: list[Operator] = []
    if work.cfg_scale > 0.0:
        ops += [
            op("cfg_sub", binary),
            op("cfg_scale", unary),
            op("cfg_add", binary),
        ]
    if work.temperature > 0:
        ops += [
            op("gumbel_cast", cast_to_f64),
            op("gumbel_rand", FLOAT64_BYTES),
            op("gumbel_log", _F64_UNARY),
            op("gumbel_neg", _F64_UNARY),
            op("gumbel_pow", _F64_UNARY),
            op("gumbel_exp", _F64_UNARY),
            op("gumbel_div", _F64_BINARY),
            op("argmax", FLOAT64_BYTES),
        ]
    else:
        ops.append(op("argmax", element_bytes))
    if work.remasking == "low_confidence":
        ops += [op("softmax_cast", cast_to_f64), op("softmax_float64", _F64_UNARY)]
    return tuple(ops)


def sampler_buffer_bytes_per_element(work: Workload) -> int:
    """Peak bytes per logit element of the sampler's own float64 tensors (beyond the BF16 logits).

    Gumbel (temperature > 0): the float64 logits, the noise, the transformed noise, exp(logits) and the quotient
    can be alive together (5 x 8). Low-confidence: the float64 copy and its softmax (2 x 8), plus the noisy
    logits still alive when there are some.
    """
    hot = work.temperature > 0
    gumbel = 5 * FLOAT64_BYTES if hot else 0
    softmax = 2 * FLOAT64_BYTES + (FLOAT64_BYTES if hot else 0) if work.remasking == "low_confidence" else 0
    return max(gumbel, softmax)
