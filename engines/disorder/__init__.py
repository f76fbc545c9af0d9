"""Disorder handling: per-stream K-slack buffers in front of the windows and the policies
that size them (fixed K, Max-K-slack, quality-driven adaptation), after chapters 3-5 of Ji's
dissertation (docs/disorder.md)."""
