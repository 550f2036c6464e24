"""One module per family of figures: each function takes the flat results table and returns a Figure."""
