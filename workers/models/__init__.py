"""Loading a model for a run: checkpoints, the LLaDA model and its weights, tokenizers, attention modules."""
