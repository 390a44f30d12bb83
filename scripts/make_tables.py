"""``python scripts/make_tables.py <paper>/<table>``: a paper's table from its runs, in a checkout; the installed
command ``clusterable-tables`` is the same (``clusterable.tables.cli``, whose help says what it writes)."""

import sys

from clusterable.tables import cli


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, train="python train.py")  # a checkout's messages name its own training command


if __name__ == "__main__":
    sys.exit(main())
