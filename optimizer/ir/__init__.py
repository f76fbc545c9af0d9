"""The plan IR: a leaf package that imports nothing else from the project.

Types, expressions, logical plan operators and their DAG, schemas, the catalog model, the
error hierarchy and the one plan printer. Optimizer, engines and cost models all import it.
"""
