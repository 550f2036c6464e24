"""The shared vocabulary: spec schema, run results, artifact layout. Pydantic only."""
