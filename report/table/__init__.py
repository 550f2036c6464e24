"""Artifacts to the flat table: one row per run, its timing columns, sessions pooled."""
