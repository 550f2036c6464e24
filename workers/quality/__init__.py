"""Quality metrics computed inside a run: BERTScore, generative perplexity, LLaDA's ELBO, degeneracy."""

from workers.quality.scorer import QualityOutcome, QualityScorer

__all__ = ["QualityOutcome", "QualityScorer"]
