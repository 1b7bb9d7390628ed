"""Scores are decided outside the kernel, for every assignment.

Learner code runs in the kernel that runs the tests, so it can make any check pass there.  The
grader therefore compares each test cell's check records with the model answer's
(course_tools/scoring.py).  Two things make that hold for every graded cell of every
assignment, not only for the lesson-1 class of tests/grading_class.py:

* every test cell of the model answer publishes check records (none is decided in the kernel
  only);
* the student ``disarmed-1`` (tests/conftest.py, ``DISARMED``) answers as ``wrong-1`` does
  and also replaces every ``check_*`` function of course_lib.checks and its lesson modules by
  one that swallows failures, so no test cell raises in the kernel: it must still score
  exactly as ``wrong-1``, cell by cell, and lose its cells for the grader's reason.
"""
from __future__ import annotations

import pytest

from conftest import DISARMED
from course_tools.scoring import MISMATCH


def _kernel_only(graded) -> list[str]:
    return sorted(k.split("/", 1)[1] for k, recs in graded.reference.items() if not recs)


def test_kernel_only_test_cells_are_reported(graded):
    """The report names test cells whose checks publish no records (for the instructor)."""
    silent = _kernel_only(graded)
    line = next((ln for ln in graded.report.splitlines() if "decided in the kernel only" in ln),
                "")
    assert all(gid in line for gid in silent) and bool(silent) == bool(line), line
    if graded.case.mini:
        assert silent == ["t-both", "t-double", "t-square"]  # bare asserts


@pytest.mark.real_assignments  # the mini course's tests are bare asserts on purpose
def test_no_test_cell_is_decided_in_the_kernel_only(graded):
    assert _kernel_only(graded) == [], (
        "these test cells publish no check records: build their checks from course_lib.checks "
        "(check_value, check_close, check_equal, check_sealed, ...)")


@pytest.mark.real_assignments  # the mini course has no disarmed student
def test_disarmed_checks_earn_nothing(graded):
    assert graded.case.wrongs, f"{graded.case.name} has no wrong answers to disarm"
    honest, hostile = graded.results["wrong-1"], graded.results[DISARMED]
    assert hostile["status"] == honest["status"] == "graded", hostile["detail"]
    mine = {c["grade_id"]: c for c in hostile["cells"]}
    theirs = {c["grade_id"]: c for c in honest["cells"]}
    assert mine.keys() == theirs.keys()
    differ = {gid: (mine[gid]["score"], theirs[gid]["score"]) for gid in mine
              if mine[gid]["score"] != theirs[gid]["score"]}
    assert not differ, f"{{cell: (disarmed, wrong-1)}} scores differ: {differ}"
    lost = [gid for gid, c in mine.items() if c["score"] < c["max_score"]]
    assert lost, "wrong-1 loses no cell, so the disarmed student proves nothing"
    head = MISMATCH.split("(")[0]
    for gid in lost:  # nothing raised in the kernel: the grader's comparison took the points
        assert mine[gid]["message"].startswith(head), (gid, mine[gid]["message"])
    # and the instructor is told, in the detail column, which cells the grader overruled
    assert f"{', '.join(lost)} passed in the notebook but not the grader's comparison" in \
        hostile["detail"], hostile["detail"]
    assert "passed in the notebook" not in honest["detail"], honest["detail"]
    summary = next(ln for ln in graded.report.splitlines()
                   if ln.startswith("test cells that passed in the notebook but not"))
    assert f"{DISARMED}/{graded.case.name}" in summary and "wrong-1/" not in summary, summary
