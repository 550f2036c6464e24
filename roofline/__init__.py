"""The analytical roofline of LLaMA and LLaDA, pure Python: operator FLOPs and bytes, GPU profiles, predictions."""
