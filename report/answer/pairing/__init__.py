"""One pairing: which models pair, its data, its records in findings.json, its words and its roofline B*."""
