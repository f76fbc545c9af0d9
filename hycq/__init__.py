"""hycq: hybrid row/column continuous-query optimizer and executor."""

__version__ = "0.1.0"
