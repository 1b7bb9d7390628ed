"""Three-way grading through nbgrader's own autograde (via course_tools.grade): for every
assignment the model answer scores full marks, the blank release scores zero, and each
plausible wrong answer of tests/wrong_answers/<assignment>.py loses exactly the test cells it
names.  Broken submissions get a row saying what is wrong and do not disturb the others.

Each assignment is graded once per run (fixture ``graded`` in conftest.py): one autograde call
per submission, submissions being the solution, the blank release, and the wrong answers
packed by ``wrong_answers.batches``.
"""
from __future__ import annotations

import ast
import csv
import subprocess
import sys
from pathlib import Path

import nbformat

import wrong_answers
from conftest import MINI_BROKEN_STATUS
from course_tools.feedback import WITHHELD, hidden_lines

REPO = Path(__file__).resolve().parent.parent


def _source(case):
    return nbformat.read(case.source_path, as_version=4)


# --- the registry ------------------------------------------------------------------------

def test_wrong_answer_registry_is_well_formed(assignment_case):
    assert wrong_answers.problems(list(assignment_case.wrongs), _source(assignment_case)) == []


def test_every_graded_cell_has_a_wrong_answer(assignment_case):
    tests = wrong_answers.graded_cells(_source(assignment_case))
    covered = {t for w in assignment_case.wrongs for t in w.loses}
    uncovered = sorted(set(tests) - covered)
    assert not uncovered, (
        f"no entry of tests/wrong_answers/{assignment_case.name}.py loses {uncovered}: add a "
        "plausible wrong answer for each (see tests/wrong_answers/README.md)")


def test_test_cells_end_in_an_assert_or_a_call(assignment_case):
    """nbgrader reads a test cell's last bare expression as its score: ``False`` earns full
    marks and a number partial credit (NBGRADER.md).  ``input()`` hangs autograde."""
    bad = []
    for cell in _source(assignment_case).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        code = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith("%"))
        tree = ast.parse(code)
        if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "input"
               for n in ast.walk(tree)):
            bad.append(f"{meta.get('grade_id', cell.source[:30])}: calls input()")
        if meta.get("grade") and not meta.get("solution") and tree.body:
            last = tree.body[-1]
            if isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call):
                bad.append(f"{meta['grade_id']}: ends in a bare expression "
                           f"{ast.unparse(last)!r}")
    assert not bad, bad


# --- three-way grading -------------------------------------------------------------------

def test_solution_scores_full_marks(graded):
    row = graded.results["solution"]
    assert row["status"] == "graded", row["detail"]
    cells = graded.cell_scores("solution")
    assert set(cells) == set(wrong_answers.graded_cells(_source(graded.case)))
    lost = {gid: s for gid, s in cells.items() if s[0] != s[1]}
    assert not lost, f"the model answer loses points in {lost}: see {graded.out}/logs/solution"
    assert row["score"] == row["max_score"] == sum(wrong_answers.graded_cells(_source(graded.case)).values())


def test_blank_release_scores_zero(graded):
    row = graded.results["blank"]
    assert row["status"] == "graded", row["detail"]
    earned = {gid: s for gid, s in graded.cell_scores("blank").items() if s[0] != 0}
    assert not earned, f"the blank release earns points in {earned}: a test that cannot fail"
    assert row["score"] == 0


def test_wrong_answers_lose_exactly_their_cells(graded):
    assert graded.batches or not graded.case.wrongs
    errors = []
    for i, batch in enumerate(graded.batches, 1):
        student = f"wrong-{i}"
        assert graded.results[student]["status"] == "graded", graded.results[student]["detail"]
        cells = graded.cell_scores(student)
        expected_zero = {t: w for w in batch for t in w.loses}
        for gid, (score, max_score) in cells.items():
            if gid in expected_zero and score != 0:
                w = expected_zero[gid]
                errors.append(f"{w.cell} ({w.why}): {gid} scored {score:g}/{max_score:g}, "
                              "expected 0")
            elif gid not in expected_zero and score != max_score:
                errors.append(f"{student} [{'; '.join(f'{w.cell}: {w.why}' for w in batch)}]: "
                              f"{gid} scored {score:g}/{max_score:g}, expected full marks")
    assert not errors, "\n".join(errors)


def test_grades_csv_agrees_with_the_gradebook(graded):
    with open(graded.out / "grades.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["assignment"] == graded.case.name]
    assert list(rows[0]) == ["student", "assignment", "score", "max_score", "status", "detail"]
    students = sorted(p.name for p in graded.submissions.iterdir())
    assert sorted(r["student"] for r in rows) == students  # one row per student
    points = sum(wrong_answers.graded_cells(_source(graded.case)).values())
    for r in rows:
        assert float(r["max_score"]) == points
        if r["status"] == "graded":
            assert float(r["score"]) == sum(s for s, _ in graded.cell_scores(r["student"]).values())
        else:
            assert float(r["score"]) == 0 and r["detail"]


def test_feedback_lists_points_and_hides_hidden_tests(graded):
    source = _source(graded.case)
    release = nbformat.read(graded.root / "release" / graded.case.name / f"{graded.case.name}.ipynb",
                            as_version=4)
    visible = {ln.strip() for c in release.cells for ln in c.source.splitlines()}
    secret = [h for h in hidden_lines(source) if len(h) >= 4 and h not in visible]
    for student, row in graded.results.items():
        text = (graded.out / "feedback" / student / f"{graded.case.name}.md").read_text()
        assert text.startswith(f"# {graded.case.name}: {row['score']:g} / {row['max_score']:g} points")
        assert "BEGIN HIDDEN" not in text
        shown = [h for h in secret if h in text]
        assert not shown, f"feedback of {student} shows hidden test code: {shown}"
        if row["status"] != "graded":
            continue
        for gid, (score, max_score) in graded.cell_scores(student).items():
            assert f"| `{gid}` | {score:g} / {max_score:g} |" in text, (student, gid)
            if score < max_score:
                assert f"### `{gid}` (" in text, f"{student}: no section on the failed {gid}"


def test_grading_leaves_submissions_untouched(graded):
    d = graded.digests
    assert d["before"]["submissions"] == d["after"]["submissions"]
    assert d["before"]["submissions"], "no submissions were hashed"


# --- broken submissions and the command line (mini course only) ---------------------------

def test_broken_submissions_get_a_clear_row(mini_graded):
    results = mini_graded.results
    for student, status in MINI_BROKEN_STATUS.items():
        assert results[student]["status"] == status, (student, results[student])
        assert results[student]["score"] == 0 and results[student]["detail"]
    assert "Untitled.ipynb" in results["untitled"]["detail"]
    assert "not valid JSON" in results["not-json"]["detail"]
    assert "'t-both' appears 2 times" in results["dup-cell"]["detail"]
    # the others were graded as if the broken ones were not there
    assert results["solution"]["score"] == results["solution"]["max_score"] == 6
    assert results["wrong-2"]["score"] == 4
    report = (mini_graded.root / "report.txt").read_text()
    for student, status in MINI_BROKEN_STATUS.items():
        assert f"{status}:" in next(ln for ln in report.splitlines() if ln.strip().startswith(student))


def test_a_deleted_test_cell_scores_zero(mini_graded):
    assert mini_graded.results["deleted-test"]["status"] == "graded"
    assert mini_graded.cell_scores("deleted-test") == {
        "t-double": (2, 2), "t-square": (0, 3), "t-both": (1, 1)}
    assert mini_graded.results["deleted-test"]["score"] == 3
    text = (mini_graded.out / "feedback" / "deleted-test" / "mini.md").read_text()
    assert "| `t-square` | 0 / 3 | failed |" in text
    assert "this test cell is not in your notebook" in text


def test_feedback_gives_the_failed_tests_message(mini_graded):
    text = (mini_graded.out / "feedback" / "wrong-2" / "mini.md").read_text()
    # the hidden test's message is shown, its code and values are not
    assert "> AssertionError: double must keep the sign of a negative x" in text
    assert "-42" not in text and "-21" not in text
    blank = (mini_graded.out / "feedback" / "blank" / "mini.md").read_text()
    assert "NotImplementedError: an answer this test uses is not written yet" in blank


def test_grading_leaves_the_course_untouched(mini_graded):
    d = mini_graded.digests
    assert d["before"]["course"] == d["after"]["course"] and d["before"]["course"]


def test_feedback_withholds_a_message_that_quotes_a_hidden_test():
    from course_tools.feedback import redact
    hidden = ['assert f(-21) == -42, "keep the sign"']
    message = 'AssertionError: keep the sign\n  assert f(-21) == -42, "keep the sign"'
    assert redact(message, hidden) == f"AssertionError: keep the sign\n{WITHHELD}"


def test_grade_command(mini_course, tmp_path, capsys):
    from course_tools.grade import main as grade_main

    subs = tmp_path / "subs"
    (subs / "ann" / "mini").mkdir(parents=True)
    (subs / "ann" / "mini" / "mini.ipynb").write_text("{not json")
    (subs / "bo" / "mini").mkdir(parents=True)
    (subs / "bo" / "mini" / "notes.txt").write_text("forgot the notebook")
    out = tmp_path / "out"
    course = ["--course", str(mini_course)]

    # the module's command line, as `make grade` runs it
    done = subprocess.run([sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                           str(out), *course], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ann" in done.stdout and "invalid_json" in done.stdout and "missing" in done.stdout
    with open(out / "grades.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s: r["status"] for s, r in rows.items()} == {"ann": "invalid_json", "bo": "missing"}
    assert rows["ann"]["max_score"] == "6"
    assert (out / "feedback" / "bo" / "mini.md").is_file()

    # an earlier grading output is replaced; anything else is refused
    (out / "feedback" / "old-student").mkdir()
    assert grade_main([str(subs), "--out", str(out), *course]) == 0
    assert not (out / "feedback" / "old-student").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "thesis.tex").write_text("keep me")
    capsys.readouterr()
    assert grade_main([str(subs), "--out", str(tmp_path / "busy"), *course]) == 2
    assert "not an earlier grading output" in capsys.readouterr().err
    assert (tmp_path / "busy" / "thesis.tex").read_text() == "keep me"
    assert grade_main([str(subs), "--out", str(subs / "ann"), *course]) == 2
    assert "must not be inside SUBMISSIONS" in capsys.readouterr().err
    assert grade_main([str(subs), "--out", str(out), "--assignment", "lesson99", *course]) == 2
    assert "unknown assignment(s) lesson99" in capsys.readouterr().err
