"""The report's figures, one module per family, each function returning a Figure; common.py holds what they share."""
