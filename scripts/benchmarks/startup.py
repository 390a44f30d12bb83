"""`python train.py --help` minus `python -c pass`, seconds. Goal: <= 1.5."""

from __future__ import annotations

import subprocess
import sys

from .common import ROOT, best_of


def measure() -> dict:
    """Best-of-3 seconds of each command in a fresh process from the repository root, and their difference: what
    the command line costs before it does anything."""

    def python(*args: str) -> None:
        subprocess.run([sys.executable, *args], cwd=ROOT, check=True, capture_output=True)

    base = best_of(lambda: python("-c", "pass"))
    help_s = best_of(lambda: python("train.py", "--help"))
    return {"startup_extra_s": help_s - base, "startup_help_s": help_s, "startup_python_s": base}
