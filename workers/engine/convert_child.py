"""Run llama.cpp's converter on one checkpoint (child process of workers/engine/gguf_convert.py).

`python -m workers.engine.convert_child CONVERTER_DIR CHECKPOINT OUT.gguf OUT_TYPE`

The converter names a tokenizer's pre-tokenizer by hashing how it splits a test string, and refuses a hash it does
not list. A byte-level BPE tokenizer it does not list (the miniature pair's, trained here) splits as GPT-2's does, so
it is registered as `gpt-2` by wrapping the converter's lookup in this process: llama.cpp's files stay as shipped.
(`gpt-2` is the name llama.cpp's loader accepts; `gpt2` converts but fails at load.)
"""

from __future__ import annotations

import sys
from pathlib import Path

GPT2_PRE_TOKENIZER = "gpt-2"


def _is_byte_level(tokenizer: object) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    pre = getattr(backend, "pre_tokenizer", None)
    return type(pre).__name__ == "ByteLevel"


def register_byte_level_bpe(text_model: type) -> None:
    """Wrap `TextModel.get_vocab_base_pre`: a byte-level BPE tokenizer it does not know is `gpt-2`."""
    known = text_model.get_vocab_base_pre

    def get_vocab_base_pre(self: object, tokenizer: object) -> str:
        try:
            return known(self, tokenizer)
        except NotImplementedError:
            if _is_byte_level(tokenizer):
                return GPT2_PRE_TOKENIZER
            raise

    text_model.get_vocab_base_pre = get_vocab_base_pre  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    converter, checkpoint, out, out_type = argv
    root = Path(converter)
    sys.path[:0] = [str(root), str(root / "gguf-py")]  # the converter's own gguf package, not this environment's
    import convert_hf_to_gguf  # type: ignore[import-not-found]
    from conversion.base import TextModel  # type: ignore[import-not-found]

    register_byte_level_bpe(TextModel)
    sys.argv = ["convert_hf_to_gguf.py", checkpoint, "--outfile", out, "--outtype", out_type]
    convert_hf_to_gguf.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
