"""Cost models for the placement optimizer; they import ``optimizer.ir`` only."""
