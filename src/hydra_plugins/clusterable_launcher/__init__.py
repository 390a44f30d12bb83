"""Hydra finds plugins in the ``hydra_plugins`` namespace package: clusterable's launcher lives here."""
