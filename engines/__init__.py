"""Execution engines: the row engine, columnar engines and the data sources they read."""
