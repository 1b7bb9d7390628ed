"""The check records and messages of the model answers and of every registered wrong answer,
against those saved in ``tests/data/check_records/<assignment>.json``.

A refactoring of ``course_lib/checks`` must leave what the grader compares (the records,
:mod:`course_lib.checks.records`) and what the learner reads (each failing test cell's error)
exactly as they were.  The saved file is the reference: a change that means to alter a check
(a new visible input, a better message) regenerates it in the same commit, so the diff shows
every record and message it changed::

    UPDATE_CHECK_RECORDS=1 .venv/bin/python -m pytest tests/test_check_records.py -k lesson4

(the test then writes the file and fails, so an update is never taken for a pass).

What is compared, read from the autograded notebooks of the ``graded`` fixture (the same
grading run as tests/test_grading.py; the throwaway ``mini`` assignment too): for the model answer, every test cell; for each wrong
answer, the test cells its entry says it loses.  A wrong answer's cell is keyed by the grade id
and the mistakes (``why``) of its submission's entries that list the cell, so the key does not
depend on how the registry is packed into submissions.  Records are compared field by field;
numbers to :data:`REL` relative or :data:`ABS` (a float32 or 16-bit value differs in its last places on another CPU), everything else
exactly.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from course_lib.checks.records import records_of

DATA = Path(__file__).resolve().parent / "data" / "check_records"
REL, ABS = 1e-4, 1e-5
"""How close a number must be to the saved one: ``|now - saved| <= ABS + REL * |saved|``, the
rule of torch.allclose.  The saved records were made on another machine than the one this test
runs on (the grader compares a learner's records with a reference run on its own machine, at the
check's tolerance); a refactor that changes what is checked moves numbers far more than this.
A value computed in float32 or 16-bit differs in its last places on another CPU, torch build
or thread count: the capstone's copy losses by 2e-7 of 0.236; lesson 3's float32 logits after
a block is added by up to 1.5e-6 from one run to the next; lesson 3's hidden multi-query
block's stream parts by 1.05e-5 of 0.72 to 3e-5 of 0.64 on another machine."""
UPDATE = os.environ.get("UPDATE_CHECK_RECORDS", "") not in ("", "0")


def _cells(nb_path: Path) -> dict[str, dict]:
    """``{grade_id: {"records": [...], "error": "ename: evalue" or ""}}`` of a notebook's
    graded test cells."""
    nb = nbformat.read(nb_path, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        errors = [f"{o.get('ename', '')}: {o.get('evalue', '')}" for o in cell.get("outputs", [])
                  if o.get("output_type") == "error"]
        out[meta["grade_id"]] = {"records": records_of(cell.get("outputs", [])),
                                 "error": "\n".join(errors)}
    return out


def collect(graded) -> dict:
    """This run's records and messages, in the saved file's layout."""
    name = graded.case.name
    autograded = graded.out / "course" / "autograded"

    def notebook(student):
        path = autograded / student / name / f"{name}.ipynb"
        assert path.exists(), f"no autograded notebook for {student}: {path}"
        return _cells(path)

    saved = {"solution": notebook("solution"), "wrong": {}}
    for i, batch in enumerate(graded.batches, 1):
        cells = notebook(f"wrong-{i}")
        for gid in sorted({t for w in batch for t in w.loses}):
            whys = sorted(w.why for w in batch if gid in w.loses)
            saved["wrong"][f"{gid} | {' + '.join(whys)}"] = cells[gid]
    return json.loads(json.dumps(saved))  # plain data (nbformat's dicts are a subclass)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(a, b, where: str, problems: list) -> None:
    """Append to ``problems`` where ``a`` (now) differs from ``b`` (saved)."""
    if _number(a) and _number(b):
        if not abs(a - b) <= ABS + REL * abs(b):
            problems.append(f"{where}: {a!r} was {b!r}")
    elif type(a) is not type(b):
        problems.append(f"{where}: {json.dumps(a)[:120]} was {json.dumps(b)[:120]}")
    elif isinstance(a, dict):
        if set(a) != set(b):
            problems.append(f"{where}: keys {sorted(a)} were {sorted(b)}")
        for k in sorted(set(a) & set(b)):
            _same(a[k], b[k], f"{where}.{k}", problems)
    elif isinstance(a, list):
        if len(a) != len(b):
            problems.append(f"{where}: {len(a)} items, were {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]", problems)
    elif a != b:
        problems.append(f"{where}: {json.dumps(a)[:200]} was {json.dumps(b)[:200]}")


def test_records_and_messages_are_those_saved(graded):
    now = collect(graded)
    path = DATA / f"{graded.case.name}.json"
    if UPDATE:
        DATA.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(now, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        pytest.fail(f"UPDATE_CHECK_RECORDS: wrote {path}; review its diff and rerun without it")
    saved = json.loads(path.read_text())
    problems: list[str] = []
    for part in ("solution", "wrong"):
        missing = sorted(set(saved[part]) - set(now[part]))
        added = sorted(set(now[part]) - set(saved[part]))
        if missing or added:
            problems.append(f"{part}: cells {missing} are gone, {added} are new")
        for key in sorted(set(saved[part]) & set(now[part])):
            _same(now[part][key], saved[part][key], f"{part}[{key}]", problems)
    assert not problems, (f"{len(problems)} differences from {path.name} (if meant, regenerate: "
                          "see this module's docstring):\n" + "\n".join(problems[:40]))


def test_every_assignment_has_saved_records():
    from conftest import REAL_ASSIGNMENTS

    assert sorted(p.stem for p in DATA.glob("*.json")) == sorted(["mini", *REAL_ASSIGNMENTS])
