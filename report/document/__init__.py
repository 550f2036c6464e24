"""The report as a document: its content, HTML and Markdown, the figure catalogue and files, the outputs, render."""
