"""The scoring rule (course_tools.scoring), no kernel: a test cell earns its points only if it
ran cleanly and its check records match the model answer's, compared in the grader."""
from __future__ import annotations

import pytest

from course_tools.scoring import JobFacts, ReferenceError_, reference_records, score_cells

TESTS = [("nb", "t-a", 2.0), ("nb", "t-b", 3.0), ("nb", "t-c", 1.0)]
REC = {"check": "value", "what": "f(1)", "got": 10, "rel": 0.0, "integer": True}


def _facts(*cells):
    events = [{"event": "kernel", "notebook": "nb", "pid": 1}]
    for i, (gid, extra) in enumerate(cells):
        events.append({"event": "start", "notebook": "nb", "index": i, "grade_id": gid})
        events.append({"event": "end", "notebook": "nb", "index": i, "grade_id": gid,
                       "role": "test", "status": "ok", "errors": [], "stderr": "",
                       "records": [], "cut": False, **extra})
    return JobFacts.from_events(events)


def test_a_cell_scores_only_if_it_ran_cleanly_and_its_records_match():
    ref = reference_records(_facts(("t-a", {"records": [REC]}), ("t-b", {}), ("t-c", {})), TESTS)
    facts = _facts(("t-a", {"records": [dict(REC, got=11)]}),  # passed in the kernel, wrong value
                   ("t-b", {"stderr": "UserWarning: hm"}),
                   ("t-c", {"errors": [{"ename": "AssertionError", "evalue": ""}]}))
    cells, answers, notes = score_cells(facts, TESTS, ref, [], 10)
    assert [c.score for c in cells] == [0.0, 3.0, 0.0]
    assert "did not get the reference result" in cells[0].message
    assert notes == ["t-a passed in the notebook but not the grader's comparison of the checks' "
                     "results (a check, a comparison function or a test changed?)"]
    assert "not held against you" in cells[1].note
    assert cells[2].message == "AssertionError: a test failed (it gives no message)"
    right = _facts(("t-a", {"records": [dict(REC, got=10.0)]}))
    assert [c.score for c in score_cells(right, TESTS, ref, [], 10, "budget")[0]] == [2.0, 0, 0]
    assert score_cells(right, TESTS, ref, [], 10, "budget")[0][1].message == "not run: budget"


def test_a_model_answer_that_fails_stops_the_grading():
    with pytest.raises(ReferenceError_, match="t-b"):
        reference_records(_facts(("t-a", {}), ("t-b", {"status": "timeout"}), ("t-c", {})), TESTS)
