"""Aggregate run directories into paper tables, ours beside the published numbers (see scripts/make_tables.py)."""
