"""Dream's sampler: its per-position token choice and its graphs."""
