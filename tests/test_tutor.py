"""The checks speak in one line in a notebook (course_lib.tutor), and say the same to
the grader as before: lesson 1 run as a learner would, in a real kernel.

* blank, Run All's first error is the first test cell, whose whole traceback is one line
  ("Exercise 1 is not answered yet: write gpt2_params above"), with the exception nbgrader
  reads unchanged (``NotImplementedError``); the demo cells before it print a note instead;
* a test-yourself cell whose variables are not set says it is not answered, in one line;
* the model answers' visible tests each print one "passed" line, and say when hidden tests
  will try more;
* a hard-coded ``gpt2_params`` fails the visible test, on a random shape;
* a learner's own error inside their function shows their frames only, no course_lib frame.
"""
from __future__ import annotations

import linecache
import re
from pathlib import Path

import nbclient
import nbformat
import pytest

from course_lib import tutor
from course_lib.checks import CheckFailed, not_answered
from course_tools.release import exercise_table

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ASSIGNMENTS = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())


def _gid(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def _run(nb, stop_at_error: bool):
    """Execute ``nb`` in a fresh python3 kernel (in notebooks/lesson1/), as Run All does when
    ``stop_at_error``; returns the notebook with outputs."""
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", allow_errors=not stop_at_error,
        resources={"metadata": {"path": str(REPO / "notebooks" / "lesson1")}})
    if stop_at_error:
        with pytest.raises(nbclient.exceptions.CellExecutionError):
            client.execute()
    else:
        client.execute()
    return nb


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def _text(cell) -> str:
    return ANSI.sub("", "".join(o.get("text", "") for o in cell.get("outputs", [])
                               if o.output_type == "stream"))


def _tb(err) -> list[str]:
    return [ANSI.sub("", line) for line in err.traceback]


@pytest.fixture(scope="module")
def blank_run():
    nb = nbformat.read(REPO / "notebooks/lesson1/lesson1.ipynb", as_version=4)
    return _run(nb, stop_at_error=True)


def test_run_all_on_a_blank_lesson_stops_at_the_first_test_with_one_line(blank_run):
    errored = [(i, c) for i, c in enumerate(blank_run.cells) if _errors(c)]
    assert len(errored) == 1, [i for i, _ in errored]
    i, cell = errored[0]
    first_test = next(c for c in blank_run.cells if c.metadata.get("nbgrader", {}).get("grade"))
    assert cell is first_test and _gid(cell) == "t-gpt2-params"
    (err,) = _errors(cell)
    assert err.ename == "NotImplementedError" and err.evalue == ""  # what nbgrader reads: unchanged
    assert _tb(err) == ["Exercise 1 is not answered yet: write gpt2_params above"]
    # The demo cell before it ran and printed a note, not an error.
    demo = blank_run.cells[i - 1]
    assert "if_answered" in demo.source
    assert _text(demo).strip() == ("(This cell waits for Exercise 1: write gpt2_params above, "
                                   "then run this cell again.)")


@pytest.fixture(scope="module")
def learner_run():
    """Lesson 1's source with the model answers and the visible tests only (the learner's
    copy), test yourself 1 not set, and two cells of a learner's own: a hard-coded
    gpt2_params and a block_parts with a bug, each passed to its check."""
    nb = nbformat.read(REPO / "solutions/lesson1/lesson1.ipynb", as_version=4)
    cells = []
    for cell in nb.cells:
        if _gid(cell) == "q-tys1":
            cell.source = "# tys1_params_millions = ...\n"
        elif _gid(cell).startswith("t-"):
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        cells.append(cell)
        if _gid(cell) == "t-block-parts":
            cells += [nbformat.v4.new_code_cell(
                "def hard_coded(d_model, n_layers, d_vocab, n_ctx):\n    return 124439808\n\n"
                "lesson1.check_gpt2_params(hard_coded)", metadata={"tags": ["hard-coded"]}),
                nbformat.v4.new_code_cell(
                "def buggy(d_model):\n    return d_model.parts\n\n"
                "lesson1.check_block_parts(buggy)", metadata={"tags": ["buggy"]}),
                nbformat.v4.new_code_cell(
                "lesson1.check_block_parts(block_parts)\nlesson1.check_gpt2_params(hard_coded)",
                metadata={"tags": ["pass-then-fail"]})]
    nb.cells = cells
    return {_gid(c) or c.metadata.get("tags", [i])[0]: c
            for i, c in enumerate(_run(nb, stop_at_error=False).cells)}


def test_a_hard_coded_answer_fails_the_visible_test_in_one_line(learner_run):
    (err,) = _errors(learner_run["hard-coded"])
    assert err.ename == "CheckFailed"
    (line,) = _tb(err)
    assert line.startswith("✗ Exercise 1: [random shape] gpt2_params(d_model="), line
    assert "is not right" in line and err.evalue in line


def test_a_learners_own_error_shows_only_their_frames(learner_run):
    (err,) = _errors(learner_run["buggy"])
    assert err.ename == "AttributeError"
    text = "\n".join(_tb(err))
    assert "course_lib" not in text and "site-packages" not in text, text
    assert "return d_model.parts" in text and "lesson1.check_block_parts(buggy)" in text


def test_a_cell_whose_second_check_fails_does_not_say_passed(learner_run):
    """Two checks in one cell, the first passing: the cell shows the failure alone (a pass
    line prints only once the whole cell has run without an error)."""
    cell = learner_run["pass-then-fail"]
    (err,) = _errors(cell)
    assert err.ename == "CheckFailed" and "passed" not in _text(cell), _text(cell)


def test_an_unset_test_yourself_answer_says_so(learner_run):
    (err,) = _errors(learner_run["t-tys1"])
    assert err.ename == "NameError"  # the grader's feedback reads "NameError: name ... is not defined"
    assert _tb(err) == ["Test yourself 1 is not answered yet: write tys1_params_millions above "
                        "and run its cell"]


def test_every_passing_test_says_so_in_one_line(learner_run):
    graded = [(gid, c) for gid, c in learner_run.items()
              if isinstance(gid, str) and gid.startswith("t-") and gid != "t-tys1"]
    assert len(graded) == 8
    for gid, cell in graded:
        assert not _errors(cell), gid
        lines = _text(cell).strip().splitlines()
        assert len(lines) == 1, (gid, lines)
        label = tutor.table()["lesson1"]["checks"][re.search(r"\.(check_\w+)", cell.source).group(1)]
        hidden = " (the instructor's hidden tests try other inputs when your work is graded)"
        assert lines[0] == f"{label['label']} passed{hidden if label['hidden'] else ''}.", lines


# --- outside a kernel ------------------------------------------------------------------------

@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_exercise_table_is_up_to_date(assignment):
    nb = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    assert tutor.table().get(assignment) == exercise_table(nb), (
        "course_lib/checks/exercises.json is out of date: run `make release`")


def test_every_graded_function_and_check_has_its_exercise():
    t = tutor.table()["lesson1"]
    assert t["answers"]["gpt2_params"] == "Exercise 1"
    assert t["answers"]["tys3_layers_factor"] == "Test yourself 3"
    assert t["checks"]["check_spec_sheet_costs"] == {"label": "Exercise 6", "hidden": True}
    assert t["checks"]["check_tys1"] == {"label": "Test yourself 1", "hidden": False}


def test_only_a_stub_or_an_answers_name_is_not_answered(monkeypatch):
    monkeypatch.setitem(tutor._state, "lesson", "lesson1")  # as after `from course_lib.checks import lesson1`

    def stub():
        raise NotImplementedError()

    with pytest.raises(NotImplementedError) as e:
        stub()
    assert not_answered(e.value) == "stub is not answered yet: write it above"
    assert not_answered(NotImplementedError("torch: no kernel for this dtype")) is None
    assert not_answered(NameError("name 'x' is not defined", name="x")) is None
    assert not_answered(NameError("...", name="gpt2_params")).startswith("Exercise 1 is not")
    assert not_answered(NameError("...", name="attention")) is None  # lesson 2's, not this lesson's


def test_a_failed_check_renders_as_one_line_and_keeps_its_message():
    e = CheckFailed("gpt2_params(d_model=768) is not right: the biases are missing")
    assert str(e) == "gpt2_params(d_model=768) is not right: the biases are missing"
    assert [ANSI.sub("", x) for x in e._render_traceback_()] == [f"✗ {e}"]
    e.exercise = "Exercise 1"
    assert ANSI.sub("", e._render_traceback_()[0]) == f"✗ Exercise 1: {e}"
    assert isinstance(e, AssertionError)  # nbgrader still scores the cell 0


def test_two_checks_of_one_exercise_say_which_passed():
    """The capstone's Exercise 1 has two test cells (its cards; an unknown family): each pass
    line names its check, so the learner can tell them apart; a check alone keeps the label."""
    assert ANSI.sub("", tutor.passed_line("capstone", "check_unknown_family")).startswith(
        "Exercise 1 (unknown family) passed")
    assert ANSI.sub("", tutor.passed_line("capstone", "check_size_card")).startswith(
        "Exercise 1 (size card) passed")
    assert ANSI.sub("", tutor.passed_line("capstone", "check_gqa")) == "Exercise 7 passed."


# --- a visible test that passes the learner's answers by keyword ------------------------------

KEYWORD_CALLS = [(a, name) for a, t in sorted(tutor.table().items())
                 for name, entry in sorted(t["checks"].items()) if entry.get("keywords")]


@pytest.mark.parametrize("assignment, check", KEYWORD_CALLS, ids=[f"{a}-{c}" for a, c in KEYWORD_CALLS])
def test_a_visible_call_with_answers_by_keyword_says_passed(assignment, check, monkeypatch):
    """lesson4's check_score_bytes(score_matrix_bytes, score_tib=score_tib) and the like print
    their pass line (before, any call with keywords was taken for a hidden test's and printed
    nothing)."""
    from notebook_cells import setup_answers_tests
    setup, answers, tests = setup_answers_tests(REPO / "solutions" / assignment / f"{assignment}.ipynb")
    monkeypatch.setattr(tutor, "_ipython", lambda: object())
    ns: dict = {}
    exec(setup, ns)
    for code in answers.values():
        try:
            exec(code, ns)
        except Exception:  # noqa: BLE001 - an answer that needs a demo cell's data: not one of these
            pass
    call = next(line for src in tests.values() for line in src.split("### BEGIN HIDDEN TESTS")[0].splitlines()
                if f".{check}(" in line)
    tutor._state["passed"] = []
    exec(call, ns)
    assert [ANSI.sub("", x).split(" passed")[0] for x in tutor._state["passed"]] == [
        tutor.table()[assignment]["checks"][check]["label"]], call
    tutor._state["passed"] = []
    assert len(KEYWORD_CALLS) >= 3


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_blank_answer_cell_names_its_exercise(assignment, monkeypatch):
    """Each answer cell of the release, run as it is given (its stub raises NotImplementedError), says which
    exercise is not answered yet and what to write, never only the generic 'this answer is not written yet'."""
    monkeypatch.setitem(tutor._state, "lesson", assignment)
    nb = nbformat.read(REPO / "notebooks" / assignment / f"{assignment}.ipynb", as_version=4)
    generic = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("solution") or cell.cell_type != "code":
            continue
        lines = [line for line in cell.source.splitlines() if not line.startswith(("import ", "from "))]
        at_top = "\n".join(line for line in lines if not line.startswith((" ", "\t", "def ", "@")) or line == "")
        if "raise NotImplementedError()" not in at_top:
            continue  # a function's stub: named by the function (test_only_a_stub_or_an_answers_name_is_not_answered)
        filename = f"/tmp/ipykernel_0/{meta['grade_id']}.py"  # how a cell's frames are named in a kernel
        monkeypatch.setitem(linecache.cache, filename, (len(cell.source), None, cell.source.splitlines(True), filename))
        with pytest.raises(NotImplementedError) as e:
            exec(compile("\n".join(lines), filename, "exec"), {})  # noqa: S102
        message = not_answered(e.value)
        labels = set(tutor.table()[assignment]["answers"].values())
        if not message or not any(message.startswith(f"{label} is not answered yet: set ") for label in labels):
            generic.append((meta["grade_id"], message))
    assert not generic, generic


def test_a_demo_cell_waiting_for_an_answer_leaves_no_empty_figure(capsys):
    """A demo cell that opens a figure and then calls an answer not written yet prints its note and closes
    the figure it opened (else empty axes show under the note: the newcomer trial's finding); figures opened
    before it, and a block that runs through, are left alone."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_lib.checks import if_answered

    def stub():
        raise NotImplementedError()

    before = plt.figure().number
    with if_answered():
        plt.subplots()
        stub()
    assert plt.get_fignums() == [before] and "waits for" in capsys.readouterr().out
    with if_answered():
        drawn = plt.figure().number
    assert plt.get_fignums() == [before, drawn]
    plt.close("all")
