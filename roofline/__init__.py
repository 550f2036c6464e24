"""Analytical roofline model of LLaMA and LLaDA inference: per-operator FLOPs and bytes on a GPU profile."""
