"""The battery of planted mistakes: every registered wrong answer (tests/wrong_answers/) fails
the visible part of its own test cell, in the learner's notebook, with one line of a course
check's feedback (a :class:`CheckFailed`, not a crash), and no cell before that test (a demo
that uses the answer) crashes; except the entries an assignment lists in ``HIDDEN_ONLY``, which
only the hidden tests catch (to show they earn their place).  That each one loses exactly its
points at grading is tests/test_grading.py's.

The notebook is the release with the model answer's code in every answer cell (the learner's
view: test cells without their hidden block), run in order as a kernel would.  It is run once
per assignment, keeping the namespace as it stood before each answer cell; an entry starts from
there with its own code in that cell and runs on to its test cell.
"""
from __future__ import annotations

import contextlib
import io
from functools import cache
from pathlib import Path

import nbformat
import pytest

import wrong_answers
from conftest import REAL_ASSIGNMENTS
from course_lib.checks import CheckFailed

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

REPO = Path(__file__).resolve().parents[1]
HIDDEN = "### BEGIN HIDDEN TESTS"


def _hidden_only(assignment: str) -> set[str]:
    module = __import__(f"wrong_answers.{assignment}", fromlist=["WRONG"])
    return set(getattr(module, "HIDDEN_ONLY", set()))


@cache
def _cells(assignment: str) -> list[tuple[str, str]]:
    """``[(grade_id or "", source)]`` of the learner's notebook with the model answers."""
    release = nbformat.read(REPO / "notebooks" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    nb = wrong_answers.solution_submission(release, source)
    return [(c.metadata.get("nbgrader", {}).get("grade_id", ""), c.source.split(HIDDEN)[0])
            for c in nb.cells if c.cell_type == "code"]


def _run(cells, ns: dict) -> None:
    for gid, src in cells:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(src, f"<cell {gid or 'demo'}>", "exec"), ns)  # noqa: S102


@cache
def _before(assignment: str) -> dict[str, dict]:
    """The model-answer namespace just before each answer cell, ``{grade_id: namespace}``."""
    ns: dict = {"__name__": "__main__"}
    out = {}
    for gid, src in _cells(assignment):
        if gid.startswith("q-"):
            out[gid] = dict(ns)
        _run([(gid, src)], ns)
    return out


PLANTED = [(a, w) for a in REAL_ASSIGNMENTS for w in wrong_answers.load(a)
           if w.why not in _hidden_only(a)]


@pytest.mark.parametrize("assignment, wrong", PLANTED,
                         ids=[f"{a}:{w.cell}:{w.why[:40]}" for a, w in PLANTED])
def test_a_planted_mistake_fails_its_visible_test_in_one_line(assignment, wrong):
    cells = _cells(assignment)
    gids = [g for g, _ in cells]
    own = "t-" + wrong.cell[2:]
    assert wrong.cell in gids and own in gids, f"{wrong.cell} or {own} is not in the notebook"
    ns = dict(_before(assignment)[wrong.cell])
    start, stop = gids.index(wrong.cell), gids.index(own)
    _run([(wrong.cell, wrong.source)], ns)
    _run(cells[start + 1:stop], ns)  # the demos between answer and test must not crash
    with pytest.raises(CheckFailed) as caught:
        _run([cells[stop]], ns)
    message = str(caught.value).strip()
    assert message and "\n" not in message, message


@pytest.mark.parametrize("assignment", REAL_ASSIGNMENTS)
def test_hidden_only_entries_are_registered(assignment):
    assert _hidden_only(assignment) <= {w.why for w in wrong_answers.load(assignment)}
