"""Artifacts → one flat table → analyses → figures (figures/) and sections (sections/) → report.html and report.md."""
