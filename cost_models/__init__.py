"""Cost models for the placement optimizer (see issue 5); they import ``optimizer.ir`` only."""
