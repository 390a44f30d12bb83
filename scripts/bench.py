"""Benchmarks: ratios and timings measured in one process; the last line printed is one JSON object.

    python scripts/bench.py                  # every case
    python scripts/bench.py --only startup   # one case

Each case is a module of scripts/benchmarks/ (docs/benchmarks.md: what each measures, its goal, its last figures).
"""

from benchmarks import main

if __name__ == "__main__":
    main(__doc__)
