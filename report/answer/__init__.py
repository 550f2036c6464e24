"""The answer: which models pair, each pairing, the findings, the verdict, the headline and findings.json."""
