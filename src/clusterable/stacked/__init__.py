"""Stacked grids: the cells of a sweep that differ only in their seed, learning rate or a loss weight, trained as
one model whose parameters have a member axis (``hydra/launcher=stacked``).

- ``grouping``: which cells stack (the rule), ``stack``: train a group and record each member as its own run,
- ``members``: the stacked parameters and the ``vmap``-ed step, ``fit``: the epoch loop with each member's own
  bookkeeping, ``optim``: Adam / AdamW / SGD with per-member hyperparameters.
"""
