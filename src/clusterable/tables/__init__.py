"""Aggregate run directories into paper tables, ours beside the published numbers (the command line:
``tables.cli``, installed as ``clusterable-tables``; ``scripts/make_tables.py`` in a checkout)."""
