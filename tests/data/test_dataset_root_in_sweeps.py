"""``dataset.root`` in a sweep whose experiment chooses the dataset in its sweep (``hydra.sweeper.params``).

Under ``-m`` Hydra composes the config once before the sweep from the command line alone, with the default dataset
(digits, which has no ``root``): ``-m experiment=corel/fashion_table1 dataset.root=DIR`` is refused there. The
refusal names the fix (choose the dataset on the command line too), and the fixed command reads ``DIR``.
"""

from __future__ import annotations

import json
from pathlib import Path

from clusterable.data.memory.mnist import expected_files

from .memory.conftest import write_idx_dataset


def test_the_refusal_names_the_dataset_to_choose(train, tmp_path: Path) -> None:
    result = train("-m", "experiment=corel/fashion_table1", f"dataset.root={tmp_path / 'mine'}")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert line == (
        "error: dataset.root is not a key of dataset=digits, the dataset a sweep composes before its cells: "
        "experiment=corel/fashion_table1 chooses the dataset per cell, in its sweep (dataset.root is a key of "
        "fashion_mnist), and Hydra applies the command line's dataset.* keys before that; choose the dataset on the "
        f"command line too: dataset=fashion_mnist dataset.root={tmp_path / 'mine'}"
    )
    assert not train.outputs.exists()  # refused before any cell


def test_a_typo_is_still_a_typo(train) -> None:
    # No dataset the sweep chooses has the key: Hydra's own message, not advice to choose a dataset.
    result = train("-m", "experiment=corel/fashion_table1", "dataset.rot=/x")
    assert result.code == 2 and "error: dataset.rot is not a key of the config (a typo?" in result.err


def test_with_the_dataset_chosen_the_sweep_reads_the_root(train, tmp_path: Path) -> None:
    root = tmp_path / "mine"
    write_idx_dataset(root, "fashion_mnist", flat=True)  # tiny: not the published files, hence verify=false
    # the experiment's budget (cpu) is 10 epochs: a run of the grid trains them
    result = train(
        "-m",
        "experiment=corel/fashion_table1",
        "dataset=fashion_mnist",
        f"dataset.root={root}",
        "dataset.reader.verify=false",
        "dataset.reader.val_size=10",
        "loss=center",
        "loss.lam=0.5",
        "trainer.max_epochs=10",
        "model.hidden=[8,8]",
    )
    assert result.code == 0, result.err
    (path,) = train.outputs.rglob("metrics.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["config"]["dataset"]["reader"]["root"] == str(root)
    files = record["data_notes"]["files"]
    assert {name: Path(files[name]["path"]) for name in files} == {n: root / n for n in expected_files("fashion_mnist")}
