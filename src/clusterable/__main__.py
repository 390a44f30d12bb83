"""``python -m clusterable ...``: the training command (``clusterable-train``, ``python train.py`` in a checkout)."""

from clusterable.cli import main

if __name__ == "__main__":
    main()
