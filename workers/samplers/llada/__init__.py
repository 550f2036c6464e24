"""LLaDA's sampler: its settings, forwards, KV cache, parallel decoding, graphs and the official reference."""
