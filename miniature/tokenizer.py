"""The pair's shared tokenizer: byte-level BPE trained on the corpus, saved as an ordinary HF folder.

One tokenizer for both models lets the AR judge score LLaDA's token ids directly. Its special tokens
use the spellings the real checkpoints use, so the loaders find them by name: `<|endoftext|>` ends a
text (LLaDA's and GPT-2's EOS), `<|mdm_mask|>` is LLaDA's [MASK], `<|pad|>` pads.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

EOS_TOKEN = "<|endoftext|>"
MASK_TOKEN = "<|mdm_mask|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (EOS_TOKEN, MASK_TOKEN, PAD_TOKEN)
DEFAULT_VOCAB_SIZE = 4096 + len(SPECIAL_TOKENS)


def train_tokenizer(texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2's pre-tokenisation) with the three special tokens at ids 0, 1, 2."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    return wrap(bpe)


def wrap(bpe: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, mask_token=MASK_TOKEN, pad_token=PAD_TOKEN,
        model_max_length=1 << 20,
    )


def special_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    return {name: int(tokenizer.convert_tokens_to_ids(name)) for name in SPECIAL_TOKENS}


def unigram_entropy_nats(token_ids: Iterable[int]) -> float:
    """H(p) of the corpus's token frequencies: the loss of a model that ignores context."""
    counts = Counter(token_ids)
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values())
