"""Artifacts to tables, figures and the HTML/Markdown report."""
