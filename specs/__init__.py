"""The shared vocabulary, pydantic only: the spec files and their schema, run results, the artifact layout."""
