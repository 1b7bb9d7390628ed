"""Shared by the lessons' check tests: the structure every graded notebook must have, and
:func:`fails` for a check's message."""
import ast
import re

import nbformat
import pytest

import wrong_answers
from course_lib.checks import CheckFailed


def fails(check, *args, **kwargs) -> str:
    """The message of the :class:`CheckFailed` that ``check(*args, **kwargs)`` must raise."""
    with pytest.raises(CheckFailed) as e:
        check(*args, **kwargs)
    return str(e.value)


def graded_cells(path, check_call: re.Pattern, tests_without_answer=()):
    """Read a source notebook and assert its nbgrader structure: no outputs or execution
    counts; answer cells ``q-…`` with a solution block; test cells ``t-…`` with points, whose
    visible part and whole source each end in a call matching ``check_call`` (a check or an
    assert, never a bare value nbgrader would read as a score); one test cell per answer cell,
    besides ``tests_without_answer`` (names without ``t-``: tests of an earlier answer).

    Returns ``(notebook, answer names, {test name: points})`` with the ``q-``/``t-`` cut off.
    """
    nb = nbformat.read(path, as_version=4)
    answers, tests = set(), {}
    for cell in nb.cells:
        assert cell.get("outputs", []) == [] and cell.get("execution_count") is None
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        gid = meta["grade_id"]
        if meta["solution"]:
            assert gid.startswith("q-") and "### BEGIN SOLUTION" in cell.source
            answers.add(gid[2:])
        elif meta["grade"]:
            assert gid.startswith("t-") and meta["points"] > 0 and cell.id == gid
            visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
            for part in (visible, cell.source):
                last = ast.parse(part).body[-1]
                assert check_call.match(ast.get_source_segment(part, last)), gid
            tests[gid[2:]] = meta["points"]
    assert answers == set(tests) - set(tests_without_answer), \
        "each q- answer cell has its t- test cell"
    return nb, answers, tests


def setup_answers_tests(path) -> tuple[str, dict[str, str], dict[str, str]]:
    """A source notebook's first code cell (its setup), its answer cells' code without the
    solution markers, and its test cells' source: ``(setup, {grade_id: code}, {grade_id:
    source})``, to run the test cells on planted answers without nbgrader."""
    nb = nbformat.read(path, as_version=4)
    setup = next(c.source for c in nb.cells if c.cell_type == "code")
    answers, tests = {}, {}
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            answers[meta["grade_id"]] = wrong_answers.strip_solution_markers(c.source)
        elif meta.get("grade"):
            tests[meta["grade_id"]] = c.source
    return setup, answers, tests
