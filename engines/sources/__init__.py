"""Data sources: the deterministic synthetic smart-plug generator and the data-file readers."""
