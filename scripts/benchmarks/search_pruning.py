"""A 40-trial Optuna search on real data (`hparams_search=corel_fashion`: Gaussian-COREL's λ and learning rate,
FFNN) with stacked batches of 10 trials and median pruning, against the same search run trial by trial without
pruning (Hydra's basic launcher, one trial a batch); wall seconds of each command, their ratio, the best val/acc
each found and the trials pruned; and, asked for, the same search trial by trial with pruning. Reported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import ROOT, loadavg_before_after

SEARCH = ["hparams_search=corel_fashion", "loss=gaussian_corel", "logger=none", "trainer.enable_progress_bar=false"]
WAYS = {
    # hydra/launcher=stacked is the search file's own; a batch of 10 trials differs only in loss.lam and
    # optimizer.lr, so it trains as one stacked model where the speed check finds that faster, else one by one
    "stacked_pruned": ["hydra.sweeper.n_jobs=10", "hydra.sweeper.pruner=median"],
    "one_by_one": ["hydra/launcher=basic", "hydra.sweeper.n_jobs=1"],
    # not run by default: pruning's share of the saving, without stacking
    "one_by_one_pruned": ["hydra/launcher=basic", "hydra.sweeper.n_jobs=1", "hydra.sweeper.pruner=median"],
}
DEFAULT_WAYS = ("stacked_pruned", "one_by_one")


def measure(dataset: str = "digits", trials: int = 40, epochs: int = 10, ways: tuple[str, ...] = DEFAULT_WAYS) -> dict:
    """Each of ``ways`` once (``WAYS``' names), in order, in a fresh process from the repository root with its own
    output folder (the same sampler seed, so each starts from the same study); ``dataset``: a real dataset's config
    name (digits, scikit-learn's bundled images; fashion_mnist where its files are installed). The best value is
    the one each search wrote to ``optimization_results.yaml``."""
    import yaml

    out: dict = {"search_pruning_dataset": dataset, "search_pruning_trials": trials, "search_pruning_epochs": epochs}
    before = os.getloadavg()[0]
    for way in ways:
        extra = WAYS[way]
        with tempfile.TemporaryDirectory() as folder:
            env = {**os.environ, "CLUSTERABLE_OUTPUTS": folder}
            command = [
                sys.executable,
                "train.py",
                *SEARCH,
                f"dataset={dataset}",
                f"trainer.max_epochs={epochs}",
                f"hydra.sweeper.n_trials={trials}",
                *extra,
            ]
            start = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"{way}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
            results = next(Path(folder).rglob("optimization_results.yaml"))
            best = yaml.safe_load(results.read_text())
            out[f"search_pruning_{way}_s"] = seconds
            out[f"search_pruning_{way}_best"] = best["best_value"]
            out[f"search_pruning_{way}_pruned"] = best.get("pruned", 0)
            out[f"search_pruning_{way}_stacked_groups"] = done.stdout.count("cells as one model")
    if {"one_by_one", "stacked_pruned"} <= set(ways):
        out["search_pruning_ratio"] = out["search_pruning_one_by_one_s"] / out["search_pruning_stacked_pruned_s"]
    out["search_pruning_load"] = loadavg_before_after(before)
    return out
