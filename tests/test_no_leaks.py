"""The student release (notebooks/) shows no solution code, no hidden test and none of the
graded answers' values.

Where the values come from: the grader runs the model answer (the source notebook) and keeps
every value its checks recorded (``OUT/reference.json``, see course_lib.checks.records): the
answers of the visible and the hidden tests.  Each number with at least 4 significant figures
(fewer are too common to mean anything: 768, 12, 0.5) is searched for in the release's cells in
the spellings a notebook would use (``124439808``, ``124,439,808``, ``124_439_808``; a float to
2-4 decimals and 4-6 significant figures; a fraction as a percentage).  The answer of a choice
question is one of the options the question lists, so it is not searched for.

"Beyond what the prose teaches on purpose": not searched for are a value that is also an input
of some check of the assignment (it appears in a record's label, e.g. ``n_ctx=4096``) and a
width or context length (2^m or 3·2^m, see :func:`shape_number`): the course's shapes are made
of those, and the prose names them.  Any other value the prose states on purpose (a figure it
derives for the learner) is listed in :data:`TAUGHT` with the reason; nothing else may appear.  Solution and hidden-test lines are
found as in tests/test_release.py (lines of those blocks, minus bare keywords and brackets).
"""
from __future__ import annotations

import re

import nbformat
import pytest

from scans import _forms, leaks, shape_number  # noqa: F401 - shape_number: the docstring's

TAUGHT: dict[str, dict[str, str]] = {
    # assignment: {spelling found in the release: why the prose shows it on purpose}
    "capstone": {"163,840": "DeepSeek-V2-Lite's max_position_embeddings, a key of its card the "
                           "prose quotes; a check of size_card records the same figure"},
}


def values_of(records: list[dict]) -> list:
    out = []
    for r in records:
        got = r.get("got")
        if r.get("check") == "close" and isinstance(got, dict):
            out += [x for x in got.get("values", [])[:64]]
        elif isinstance(got, (list, tuple)):
            out += list(got)
        else:
            out.append(got)
    return out


def found_values(reference: dict[str, list[dict]], release) -> list[tuple[str, str]]:
    """``[(test cell, spelling)]`` of recorded values that appear in the release's cells."""
    text = "\n".join(c.source for c in release.cells)
    labels = " ".join(str(r.get("what", "")) for recs in reference.values() for r in recs)
    inputs = set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?", labels))
    found = set()
    for cell, records in reference.items():
        for v in values_of(records):
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (
                    str(v) in inputs or (float(v).is_integer() and str(int(v)) in inputs)):
                continue  # an input of some check (a shape's number), not an answer
            for form in _forms(v):
                if form in text and re.search(rf"(?<![\w.]){re.escape(form)}(?![\d])", text):
                    found.add((cell, form))
    return sorted(found)


pytestmark = pytest.mark.real_assignments  # the throwaway course has no release in notebooks/


@pytest.fixture
def real_graded(graded):
    return graded


def test_the_release_leaks_no_solution_no_hidden_test_and_no_answer(real_graded):
    g = real_graded
    release = nbformat.read(g.case.release_path, as_version=4)
    source = nbformat.read(g.case.source_path, as_version=4)
    assert leaks(source, release) == []
    allowed = TAUGHT.get(g.case.name, {})
    found = [f"{cell}: {form}" for cell, form in found_values(g.reference, release)
             if form not in allowed]
    assert not found, (f"notebooks/{g.case.name} shows graded answers' values: {found}; if the "
                       "prose teaches one on purpose, list it in TAUGHT with the reason")
    assert sum(len(values_of(r)) for r in g.reference.values()) > 0, "no values recorded"


def test_the_scan_finds_a_planted_answer(real_graded):
    """The scan is not blind: a release with one recorded value pasted into a markdown cell
    fails it, in each usual spelling."""
    g = real_graded
    release = nbformat.read(g.case.release_path, as_version=4)
    values = [v for recs in g.reference.values() for v in values_of(recs) if _forms(v)]
    assert values, f"{g.case.name} records no value with 4 significant figures"
    v = values[0]
    for form in sorted(_forms(v)):
        planted = nbformat.from_dict(release)
        planted.cells.append(nbformat.v4.new_markdown_cell(f"The answer is {form}."))
        assert any(f == form for _, f in found_values(g.reference, planted)), form
