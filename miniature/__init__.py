"""The study in miniature: a small LLaMA/LLaDA pair trained here, on text rebuilt offline, and shipped."""
