"""Hydra finds plugins in the ``hydra_plugins`` namespace package: clusterable's sweeper lives here."""
