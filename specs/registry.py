"""The model registry: every architecture family the package measures, described once as data.

A spec's `arch` names one entry. Everything that differs between families is read from its entry, never
from an `if arch == ...` in the runner, the roofline or the report: the paradigm (diffusion or
autoregressive) decides which side of a pairing a model stands on, `sampler` which step iterator generates
with it, `layout` which transformers class its weights load into without remote code, and the shape and
`ModelShape.attention_bias` what the roofline costs. Adding a family is one `Family` here, plus a sampler
module where its sampler is new.

The presets are published config.json numbers (the full-size one) and small shapes of the same layout for
CPU runs; the hub ids are the checkpoints a spec may name for the family.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from specs.shapes import MINILM_VOCAB_SIZE, ModelShape

Arch = Literal["llama", "llada", "qwen2", "dream", "fast_dllm_v2"]
Paradigm = Literal["diffusion", "autoregressive"]
# The step iterator that generates with a family (workers/samplers/): LLaDA's semi-autoregressive blocks,
# Dream's whole-sequence denoising, Fast-dLLM v2's block diffusion over a KV cache, or the autoregressive loop.
SamplerName = Literal["llada", "dream", "block_diffusion", "autoregressive"]
# The transformers class the weights load into: LlamaForCausalLM (no biases) or Qwen2ForCausalLM (QKV bias).
Layout = Literal["llama", "qwen2"]

# Whether a layout's q, k and v projections carry a bias (Qwen2's always do; LLaMA's never do here).
LAYOUT_QKV_BIAS: dict[str, bool] = {"llama": False, "qwen2": True}

ARCHS: tuple[str, ...] = get_args(Arch)
PARADIGMS: tuple[str, ...] = get_args(Paradigm)


class Family(BaseModel):
    """One architecture family: what it is, how it loads, how it generates and what the roofline costs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # the spec's `arch`
    title: str  # how the report names the family
    paradigm: Paradigm
    sampler: SamplerName
    layout: Layout
    bidirectional: bool  # attention sees the whole sequence, or (block diffusion) the whole of its block
    logit_shift: int  # positions between a token and the logits that predict it (Dream: 1; LLaDA: 0)
    checkpoint_model_types: tuple[str, ...]  # config.json model_type values that load as this family
    hub_ids: tuple[str, ...]
    presets: dict[str, ModelShape]  # synthetic shapes by name; `full_size` is the published one
    full_size: str
    # The autoregressive family a diffusion family is paired with first in a report: the one it was initialised
    # from or is compared with at the same scale (None for autoregressive families).
    peer: str | None = None
    # What the family's authors published of its quality against its step count, with the source: what a verdict
    # says where a sweep measured no quality at that scale (synthetic weights). None: nothing recorded here.
    published_quality: str | None = None

    @property
    def is_diffusion(self) -> bool:
        return self.paradigm == "diffusion"

    def preset(self, name: str) -> ModelShape:
        """A named preset shape; the error lists this family's presets."""
        try:
            return self.presets[name]
        except KeyError:
            raise KeyError(
                f"unknown synthetic preset {name!r} for arch {self.name!r}; allowed: {', '.join(self.presets)}"
            ) from None

    @property
    def full_shape(self) -> ModelShape:
        """The published shape: what a checkpoint of this family not yet loaded is costed as."""
        return self.presets[self.full_size]


# ---------------------------------------------------------------- the published shapes

# Meta-Llama-3-8B and GSAI-ML/LLaDA-8B-Base config.json.
_LLAMA_8B = ModelShape(
    hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8, intermediate_size=14336,
    vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
)
_LLADA_8B = ModelShape(
    hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=32, intermediate_size=12288,
    vocab_size=126464, max_position_embeddings=4096, rope_theta=500000.0, rms_norm_eps=1e-5,
)
# Qwen/Qwen2.5-7B config.json; Dream-org/Dream-v0-Base-7B was initialised from it and has the same numbers.
_QWEN2_7B = ModelShape(
    hidden_size=3584, num_layers=28, num_heads=28, num_kv_heads=4, intermediate_size=18944,
    vocab_size=152064, max_position_embeddings=131072, rope_theta=1000000.0, rms_norm_eps=1e-6,
    attention_bias=True,
)

# tiny: seconds on 2 CPU cores; small: the benchmark size (4 layers, d=512). Both use the offline BERT
# tokenizer's vocabulary, which the synthetic models tokenize with.
_LLAMA_TINY = ModelShape(
    hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=192,
    vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=2048,
)
_LLADA_TINY = ModelShape(
    hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=4, intermediate_size=176,
    vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=2048,
)
_LLAMA_SMALL = ModelShape(
    hidden_size=512, num_layers=4, num_heads=8, num_kv_heads=2, intermediate_size=1792,
    vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=4096,
)
_LLADA_SMALL = ModelShape(
    hidden_size=512, num_layers=4, num_heads=8, num_kv_heads=8, intermediate_size=1536,
    vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=4096,
)
# Dream and Qwen2.5 share one shape at every size, as their full-size checkpoints do (7 query heads per KV head).
_QWEN2_TINY = ModelShape(
    hidden_size=112, num_layers=2, num_heads=7, num_kv_heads=1, intermediate_size=592,
    vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=2048, rope_theta=1000000.0, rms_norm_eps=1e-6,
    attention_bias=True,
)
_QWEN2_SMALL = ModelShape(
    hidden_size=448, num_layers=4, num_heads=7, num_kv_heads=1, intermediate_size=2368,
    vocab_size=MINILM_VOCAB_SIZE, max_position_embeddings=4096, rope_theta=1000000.0, rms_norm_eps=1e-6,
    attention_bias=True,
)

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name="llama", title="LLaMA", paradigm="autoregressive", sampler="autoregressive", layout="llama",
            bidirectional=False, logit_shift=1, checkpoint_model_types=("llama",),
            hub_ids=("meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Llama-3.1-8B",
                     "meta-llama/Llama-3.1-8B-Instruct"),
            presets={"tiny": _LLAMA_TINY, "small": _LLAMA_SMALL, "8b": _LLAMA_8B}, full_size="8b",
        ),
        Family(
            name="llada", title="LLaDA", paradigm="diffusion", sampler="llada", layout="llama",
            bidirectional=True, logit_shift=0, checkpoint_model_types=("llada", "llama"),
            hub_ids=("GSAI-ML/LLaDA-8B-Base", "GSAI-ML/LLaDA-8B-Instruct", "GSAI-ML/LLaDA-1.5"),
            presets={"tiny": _LLADA_TINY, "small": _LLADA_SMALL, "8b": _LLADA_8B}, full_size="8b", peer="llama",
            published_quality=(
                "LLaDA's authors report quality best at K = N_out and lower with fewer steps (Nie et al., Large "
                "Language Diffusion Models, arXiv:2502.09992v3, App. B.7, Fig. 5: LLaDA 8B Base, N_out = 256, K = "
                "32-256, accuracies plotted only); the published LLaDA-8B figure at N_out = 256 with blocks of 32 is "
                "at K = N_out (GSM8K 79.3%, LLaDA-8B-Instruct, the baseline of Fast-dLLM, arXiv:2505.22618), and none "
                "is published at K = N_out/4 or N_out/2"),
        ),
        Family(
            name="qwen2", title="Qwen2.5", paradigm="autoregressive", sampler="autoregressive", layout="qwen2",
            bidirectional=False, logit_shift=1, checkpoint_model_types=("qwen2",),
            hub_ids=("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct"),
            presets={"tiny": _QWEN2_TINY, "small": _QWEN2_SMALL, "7b": _QWEN2_7B}, full_size="7b",
        ),
        Family(
            name="dream", title="Dream", paradigm="diffusion", sampler="dream", layout="qwen2",
            bidirectional=True, logit_shift=1, checkpoint_model_types=("Dream",),
            hub_ids=("Dream-org/Dream-v0-Base-7B", "Dream-org/Dream-v0-Instruct-7B"),
            presets={"tiny": _QWEN2_TINY, "small": _QWEN2_SMALL, "7b": _QWEN2_7B}, full_size="7b", peer="qwen2",
        ),
        # Fast-dLLM v2 (Wu et al., arXiv:2509.26328): Qwen2.5-7B-Instruct fine-tuned (~1B tokens) into block
        # diffusion; its network and config.json numbers are Qwen2.5-7B's.
        Family(
            name="fast_dllm_v2", title="Fast-dLLM v2", paradigm="diffusion", sampler="block_diffusion",
            layout="qwen2", bidirectional=True, logit_shift=1, checkpoint_model_types=("Fast_dLLM_Qwen",),
            hub_ids=("Efficient-Large-Model/Fast_dLLM_v2_7B",),
            presets={"tiny": _QWEN2_TINY, "small": _QWEN2_SMALL, "7b": _QWEN2_7B}, full_size="7b", peer="qwen2",
            published_quality=(
                "Fast-dLLM v2's authors report it matching or surpassing its autoregressive base (Wu et al., Fast-dLLM "
                "v2, arXiv:2509.26328, abstract; Qwen2.5-7B-Instruct), with blocks of 32 tokens: Fast-dLLM v2 7B "
                "scores GSM8K 83.7 and averages 60.3 over HumanEval, HumanEval+, MBPP, MBPP+, GSM8K, MATH, IFEval, "
                "MMLU and GPQA (NVlabs/Fast-dLLM, v2/README.md); no figure per threshold is recorded here"),
        ),
    )
}

assert tuple(FAMILIES) == ARCHS, "every Arch has exactly one registry entry"
# Every preset name some family has, for help texts; a family's own are `Family.presets`.
PRESET_NAMES: tuple[str, ...] = tuple(dict.fromkeys(name for f in FAMILIES.values() for name in f.presets))


def family(arch: str) -> Family:
    """The registry entry of an arch; the error lists the families that exist."""
    try:
        return FAMILIES[arch]
    except KeyError:
        raise KeyError(f"unknown arch {arch!r}; allowed: {', '.join(FAMILIES)}") from None


def is_diffusion(arch: str) -> bool:
    return family(arch).is_diffusion


def archs_of(paradigm: Paradigm) -> tuple[str, ...]:
    """The families of one paradigm, in registry order (the report's columns of `arch` filter by these)."""
    return tuple(name for name, f in FAMILIES.items() if f.paradigm == paradigm)


def preset_shape(arch: str, name: str) -> ModelShape:
    """A family's named preset shape."""
    return family(arch).preset(name)


def full_shape(arch: str) -> ModelShape:
    """A family's published shape (LLaMA-3-8B, LLaDA-8B, Qwen2.5-7B, Dream-7B, Fast-dLLM v2-7B)."""
    return family(arch).full_shape


def loads_model_type(arch: str, model_type: str | None) -> bool:
    """Whether a checkpoint's config.json model_type loads as `arch` without remote code."""
    return model_type in family(arch).checkpoint_model_types


def model_type_advice(arch: str, model_type: object) -> str:
    """Why a config.json whose model_type does not load as `arch` is refused, and what to do. Remote code is
    offered only to an autoregressive family: a diffusion family's sampler needs the package's own loading, so
    ModelSpec refuses `trust_remote_code` for it."""
    entry = family(arch)
    allowed = " or ".join(repr(t) for t in entry.checkpoint_model_types)
    if model_type is None:
        return (f"has a config.json with no model_type, so it names no architecture (a {entry.title} "
                f"checkpoint's says {allowed}): give the checkpoint's own config.json")
    owners = [f.name for f in FAMILIES.values() if model_type in f.checkpoint_model_types]
    if owners:
        return f"is a {model_type} checkpoint (model_type {model_type!r}); give it arch: {' or '.join(owners)}"
    if entry.is_diffusion:
        return (f"has model_type {model_type!r}, which arch {arch} does not load (allowed: {allowed}); give a "
                f"{entry.title} checkpoint: {entry.title} models never run remote code")
    return (f"has model_type {model_type!r}, which arch {arch} loads only with the checkpoint's own code (without "
            f"it: {allowed}); set source.trust_remote_code: true to run that code")
