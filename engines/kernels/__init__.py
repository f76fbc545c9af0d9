"""Vectorized kernels (numpy over Arrow buffers) shared by the engines: the one place where
arithmetic that every engine must agree on bit for bit is written once."""
