"""The benchmark scripts (run as ``python experiments/NAME.py``; experiments/README.md lists
them). A package so that scripts share modules (``experiments._common``,
``experiments.migration_bench``) and mypy checks each file under one name."""
