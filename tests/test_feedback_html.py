"""The HTML feedback page (course_tools.feedback_html) shows the learner's notebook, points and
messages, and never a hidden test's code: checked on the page's *text* (tags stripped,
entities decoded, as a browser shows it), since syntax highlighting splits code into spans.
The graded pages of every assignment are scanned in tests/test_grading.py
(``test_feedback_lists_points_and_hides_hidden_tests``)."""
from __future__ import annotations

import copy

import nbformat
import pytest

import wrong_answers
from scans import page_text, shown_hidden
from course_tools.feedback import CellResult, Report, hidden_lines
from course_tools.feedback_html import WITHHELD_OUTPUT, feedback_notebook, render_html


@pytest.fixture
def mini(mini_course):
    release = wrong_answers.read(mini_course / "notebooks" / "mini" / "mini.ipynb")
    source = wrong_answers.read(mini_course / "solutions" / "mini" / "mini.ipynb")
    return release, source


def _autograded_like(release, source):
    """What nbgrader's autograded notebook looks like: the model answer, test cells restored
    with their hidden tests, a failing hidden assert's traceback, a learner cell that prints
    the input history (which holds the hidden tests once they ran)."""
    nb = copy.deepcopy(source)
    test = next(c for c in nb.cells if wrong_answers._meta(c).get("grade_id") == "t-double")
    hidden = hidden_lines(source)
    test.outputs = [nbformat.v4.new_output(
        "error", ename="AssertionError", evalue="double must keep the sign of a negative x",
        traceback=["Traceback", f"----> 3 {hidden[0]}"])]
    spy = nbformat.v4.new_code_cell("print(In)")
    spy.outputs = [nbformat.v4.new_output("stream", name="stdout", text=str([hidden[0]]))]
    nb.cells.append(spy)
    mine = nbformat.v4.new_code_cell("print(double(5))")
    mine.outputs = [nbformat.v4.new_output("stream", name="stdout", text="10\n"),
                    nbformat.v4.new_output("display_data", data={
                        "application/vnd.course-check-record+json": {"what": "planted-record"}})]
    nb.cells.append(mine)
    return nb


def _report():
    return Report("ann", "mini", "graded", score=4, max_score=6, cells=[
        CellResult("t-double", "mini", 0, 2,
                   message="AssertionError: double must keep the sign of a negative x"),
        CellResult("t-square", "mini", 3, 3), CellResult("t-both", "mini", 1, 1)],
        notes=["graded Copy of mini.ipynb, the only notebook in mini/"], late=True)


def test_the_page_shows_points_messages_and_no_hidden_test(mini):
    release, source = mini
    secret = [h for h in hidden_lines(source) if len(h) >= 4]
    assert secret
    page = render_html(_autograded_like(release, source), _report(), hidden_lines(source))
    text = page_text(page)
    assert "mini: 4 / 6 points" in text and "late" in text
    assert "<li>" not in text and "<div" not in text  # no tag escaped by nbconvert's bleach
    assert "t-double: 0 / 2 points (failed)" in text and "t-square: 3 / 3 points" in text
    assert "double must keep the sign of a negative x" in text  # the check's message
    assert "graded Copy of mini.ipynb" in text
    assert "print(double(5))" in text and "10" in text  # the learner's own work and output
    assert WITHHELD_OUTPUT in text  # the cell that printed a hidden test
    assert shown_hidden(page, secret) == []
    for literal in ("double(-21)", "-42", "square(0.5)", "BEGIN HIDDEN", "checksum"):
        assert literal not in text, literal
    shown = feedback_notebook(_autograded_like(release, source), _report(), hidden_lines(source))
    assert not [o for c in shown.cells for o in c.get("outputs", [])
                if "application/vnd.course-check-record+json" in o.get("data", {})]
    assert text.index("mini: 4 / 6 points") < text.index("def double")  # total on top


def test_the_scan_sees_a_hidden_test_left_in(mini):
    """Not blind: the same page rendered without the hidden lines to strip shows them, and
    the scan says so (the markers' blocks are still cut; a copy without markers is not)."""
    release, source = mini
    secret = [h for h in hidden_lines(source) if len(h) >= 4]
    nb = _autograded_like(release, source)
    for cell in nb.cells:  # hidden tests pasted without their markers
        cell.source = cell.source.replace("### BEGIN HIDDEN TESTS", "").replace(
            "### END HIDDEN TESTS", "")
    assert shown_hidden(render_html(nb, _report(), []), secret) != []
    assert shown_hidden(render_html(nb, _report(), hidden_lines(source)), secret) == []


def test_an_ungraded_submission_gets_its_summary(mini):
    r = Report("bo", "mini", "misnamed", detail="found 2 notebooks in mini/ (a.ipynb, "
               "b.ipynb) and none named mini.ipynb: which one to grade?", max_score=6)
    text = page_text(render_html(None, r, []))
    assert "mini: 0 / 6 points" in text and "which one to grade?" in text
