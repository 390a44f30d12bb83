"""``RunRecord``, the one shape of metrics.json: every kept record reads and writes back equal, older shapes are
read, anything else is refused in one line, ``docs/design.md``'s table is its field list, and the code reads and
writes it only through the class."""

from __future__ import annotations

import json
import math
import re
from dataclasses import fields
from pathlib import Path

import pytest

from clusterable.record import SCHEMA, STATUSES, RecordError, RunRecord

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "results").rglob("metrics.json"))


def schema2(payload: dict) -> dict:
    """A schema-1 record as schema 2 writes it: ``schema`` added, the resolver notes moved under ``notes``."""
    out = {**payload, "schema": SCHEMA}
    listed = out.pop("resolver_notes", [])
    notes = {key: out.pop(key) for key in [*listed, *RunRecord.LEGACY_NOTES] if key in out}
    return out | ({"notes": notes} if notes else {})


def test_every_kept_record_reads_and_writes_back_equal(tmp_path: Path) -> None:
    assert len(RESULTS) >= 100
    for path in RESULTS:
        payload = json.loads(path.read_text())
        record = RunRecord.from_dict(payload)
        assert record.to_dict() == schema2(payload), path
        # and through the file, as a re-scoring or a skipped cell's note update writes it
        record.write(tmp_path)
        assert RunRecord.read(tmp_path).to_dict() == record.to_dict(), path


def test_schema_1_notes_move_under_notes_and_write_as_schema_2(tmp_path: Path) -> None:
    old = {"status": "ok", "metrics": {"test/acc": 0.9}, "resolver_notes": ["tuned_lambda"], "tuned_lambda": 0.1}
    record = RunRecord.from_dict(old)
    assert record.notes == {"tuned_lambda": 0.1} and record.schema == 1
    out = record.to_dict()
    assert out["notes"] == {"tuned_lambda": 0.1} and out["schema"] == SCHEMA
    assert "tuned_lambda" not in out and "resolver_notes" not in out
    # the oldest records held a note without listing it
    assert RunRecord.from_dict({"lambda_fallback": True}).notes == {"lambda_fallback": True}
    assert RunRecord.from_dict(out) == RunRecord.from_dict({**out})


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2], "not a mapping but list"),
        ({"status": "ok", "acc": 0.9}, "unknown key 'acc': not a field of RunRecord"),
        ({"status": "ok", "metrics": [0.9]}, "metrics is a list, not a dict"),
        ({"schema": SCHEMA + 1}, f"schema {SCHEMA + 1} is newer than this clusterable's ({SCHEMA})"),
        ({"schema": "2"}, "schema is '2', not a version number"),
    ],
)
def test_anything_else_is_refused_in_one_line(payload, message: str) -> None:
    with pytest.raises(RecordError) as e:
        RunRecord.from_dict(payload)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_file_that_is_not_a_record_is_named(tmp_path: Path) -> None:
    assert RunRecord.read(tmp_path) is None  # no metrics.json: no record
    (tmp_path / "metrics.json").write_text('{"status": "ok"')
    with pytest.raises(RecordError, match=r"metrics\.json: JSONDecodeError$"):
        RunRecord.read(tmp_path)
    (tmp_path / "metrics.json").write_text('{"status": "ok", "lr": 0.1}')
    with pytest.raises(RecordError, match=r"metrics\.json: unknown key 'lr'"):
        RunRecord.read(tmp_path)


def test_a_write_is_atomic_json_with_nan_as_null(tmp_path: Path) -> None:
    record = RunRecord(status="ok", metrics={"test/acc": 0.5, "test/nmi": math.nan}, seed=3)
    path = record.write(tmp_path)
    assert json.loads(path.read_text())["metrics"] == {"test/acc": 0.5, "test/nmi": None}
    assert oct(path.stat().st_mode & 0o777) == oct(0o644 & ~_umask())
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left
    # what is unset is not written (but the fields every record has)
    assert set(json.loads(path.read_text())) == set(RunRecord.ALWAYS)


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_optimized_metric_is_read_in_one_place() -> None:
    record = RunRecord(status="ok", metrics={"val/acc": 0.9}, config={"optimized_metric": "val/acc"})
    assert record.optimized() == 0.9 and record.optimized("val/nmi") is None
    assert RunRecord(status="diverged", metrics={"val/acc": 0.9}).optimized("val/acc") is None
    assert RunRecord(status="ok").optimized() is None  # no objective: no value


def design_table() -> list[str]:
    text = (ROOT / "docs" / "design.md").read_text()
    block = text.split("<!-- record fields -->")[1].split("<!-- /record fields -->")[0]
    return re.findall(r"^\| `(\w+)` \|", block, flags=re.M)


def test_the_design_doc_table_is_the_record_s_field_list_both_ways() -> None:
    documented = design_table()
    assert documented == [f.name for f in fields(RunRecord)], "docs/design.md's record table and RunRecord differ"
    text = (ROOT / "docs" / "design.md").read_text()
    always = re.findall(r"^\| `(\w+)` \| \*always\*", text, flags=re.M)
    assert tuple(always) == RunRecord.ALWAYS


def sources() -> list[Path]:
    return sorted((ROOT / "src").rglob("*.py"))


def test_the_code_reads_records_only_through_the_class() -> None:
    untyped = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sources()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "payload[" in line or "payload.get(" in line
    ]
    assert not untyped, untyped


# A status compared or assigned as a literal: ``status == "ok"``, ``in ("ok", "diverged")``, ``status="failed"``.
STATUS_WORD = "|".join(STATUSES)
LITERAL = re.compile(
    rf"""(status\s*(==|!=|=)\s*|\bin \(|"status":\s*)["']({STATUS_WORD})["']|\(["']({STATUS_WORD})["'],"""
)


def test_no_status_literal_outside_the_record_module() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sources()
        if p.name != "record.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if LITERAL.search(line)
    ]
    assert not found, found
    assert LITERAL.search('if record.status == "ok":') and LITERAL.search('x in ("failed", "partial")')


def test_no_exit_status_global_and_no_launcher_matched_by_its_class_name() -> None:
    text = {p: p.read_text() for p in sources()}
    assert not [p for p, t in text.items() if re.search(r"^exit_status\s*=", t, flags=re.M)]
    assert not [p for p, t in text.items() if "exit_status[" in t]
    by_name = re.compile(r"""["'](joblib|stacked|Slurm|OptunaSweeper)["'] in """)
    assert not [str(p) for p, t in text.items() if by_name.search(t)]


def test_a_kept_record_is_reused_by_its_grid_not_trained_again(train) -> None:
    """The cell identity of a record written before ``RunRecord`` (schema 1) is unchanged: its grid, run again
    where the record is restored, skips it."""
    import shutil

    sweep = ROOT / "results" / "multirun" / "full" / "corel" / "digits_table1"
    cells = [sweep / "dataset=digits,loss.lam=0.1,loss=center,model=ffnn"]
    assert all("schema" not in json.loads((c / "metrics.json").read_text()) for c in cells)
    for cell in cells:
        shutil.copytree(cell, train.outputs / "multirun" / "full" / "corel" / "digits_table1" / cell.name)
    result = train("-m", "experiment=corel/digits_table1", "loss=center", "loss.lam=0.1")
    assert result.code == 0 and "sweep: 0 ok, 0 failed, 1 skipped" in result.out, result
