"""The verdict: the short one, the full one, how sure it is, and its quality sentence."""
