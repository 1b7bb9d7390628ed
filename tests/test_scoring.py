"""The scoring rule (course_tools.scoring), no kernel: a test cell earns its points only if it
ran cleanly and its check records match the model answer's, compared in the grader."""
from __future__ import annotations

import pytest

from course_tools.scoring import (JobFacts, ReferenceError_, check_calls, reference_records,
                                   score_cells)

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


def test_a_check_replaced_or_called_wrongly_is_said_so():
    """A test cell whose own call of its check fails (a learner's lambda in the check's place
    takes no ``cases``) says so in its message and the row's notes; the learner's function
    raising a TypeError inside the check is reported as it is."""
    calls = {("nb", "t-a"): check_calls("lesson4.check_rotary(rotary)\n"
                                        "lesson4.check_rotary(rotary, cases=[dict(seed=3)])"),
             ("nb", "t-b"): check_calls("lesson4.check_flash(a, b)")}
    bad_call = "<lambda>() got an unexpected keyword argument 'cases'"
    own = "rotary() takes 1 positional argument but 2 were given"
    facts = _facts(("t-a", {"errors": [{"ename": "TypeError", "evalue": bad_call}]}),
                   ("t-b", {"errors": [{"ename": "TypeError", "evalue": "check_flash() takes "
                                        "1 positional argument but 2 were given"}]}),
                   ("t-c", {"errors": [{"ename": "TypeError", "evalue": own}]}))
    cells, _, notes = score_cells(facts, TESTS, {}, [], 10, calls=calls)
    assert [c.score for c in cells] == [0.0, 0.0, 0.0]
    assert cells[0].message.startswith(
        "the test cell's check lesson4.check_rotary was replaced or called wrongly: calling it "
        f"raised TypeError: {bad_call}. If your notebook assigns to lesson4.check_rotary"), cells[0]
    assert "lesson4.check_flash was replaced" in cells[1].message
    assert cells[2].message == f"TypeError: {own}"
    assert notes == [f"the test cell's check was replaced or called wrongly in t-a "
                     f"(lesson4.check_rotary: TypeError: {bad_call}); t-b (lesson4.check_flash: "
                     "TypeError: check_flash() takes 1 positional argument but 2 were given)"]


def test_a_death_then_a_hung_cell_says_both():
    """A kernel killed in one cell (a new kernel runs the next ones) and then a cell that
    ignores the interrupt: the row names the hung cell as what stopped the later cells, not
    the death alone (a newcomer's os._exit, then while True with SIGINT ignored)."""
    from course_tools.grade import _stop_words
    from course_tools.protocol import JobResult, Limits
    limits = Limits(cell_timeout=60, notebook_timeout=600, max_cell_output=1, max_notebook_output=1,
                    memory=0, job_memory=0, processes=0, scratch=0, file_size=0)
    facts = _facts(("q-a", {"status": "dead", "role": "answer"}), ("t-a", {}),
                   ("q-b", {"status": "unresponsive", "role": "answer"}), ("t-b", {"status": "not_run"}))
    status, detail, _ = _stop_words(JobResult(job_id="j", ok=True), facts, limits)
    assert detail == ("kernel died in q-a; a new kernel ran the cells after it until q-b ran past the "
                      "60 s limit per cell and ignored the interrupt, so later cells did not run"), detail
    facts = _facts(("q-a", {"status": "dead", "role": "answer"}), ("t-a", {"status": "not_run"}))
    assert _stop_words(JobResult(job_id="j", ok=True), facts, limits)[1] == \
        "kernel died in q-a; later cells did not run"
