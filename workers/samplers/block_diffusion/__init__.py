"""Fast-dLLM v2's block-diffusion sampler: its cache, forwards, token rule and graphs."""
