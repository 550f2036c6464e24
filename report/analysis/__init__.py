"""The analyses over the flat table: statistics, intervals and B*, parity and equivalence, quality, energy, predictions, variants, history, departures."""
