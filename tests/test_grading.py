"""Grading through nbgrader's own autograde (via course_tools.grade).

Three-way, for every assignment: the model answer scores full marks, the blank release scores
zero (status ``blank``), and each plausible wrong answer of tests/wrong_answers/<assignment>.py
loses exactly the test cells it names.

A class (tests/grading_class.py, for lesson 1): broken and hostile submissions of every kind
the grade command guarantees to survive, graded in one run with the others: every student
has a row and a reason, good submissions keep every point, hostile ones earn nothing they did
not answer, and nothing submitted or in the gradebook changes.  The mini course adds a
notebook stopped by its budget, and checks that --jobs and grading alone change nothing.

Each assignment is graded once per run (fixture ``graded`` in conftest.py).
"""
from __future__ import annotations

import ast
import copy
import csv
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

import grading_class
import wrong_answers
from conftest import MINI_NEARLY_BLANK, MINI_SETTINGS
from scans import page_text, shown_hidden
from course_tools.feedback import STATUS_WORDS, WITHHELD, hidden_lines
from course_tools.intake import answers_changed

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
    marks and a number partial credit (nbgrader's documentation, autograder test cells).  ``input()`` hangs autograde."""
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


BLANK_REASON = "no answer cell was changed from the release"


def test_blank_release_scores_zero(graded):
    row = graded.results["blank"]
    earned = {gid: s for gid, s in graded.cell_scores("blank").items() if s[0] != 0}
    assert not earned, f"the blank release earns points in {earned}: a test that cannot fail"
    assert row["score"] == 0
    # flagged, with its reason, in the CSV, the report and the student's feedback
    assert row["status"] == "blank" and row["detail"] == BLANK_REASON, row
    with open(graded.out / "grades.csv", newline="") as f:
        csv_row = next(r for r in csv.DictReader(f) if r["student"] == "blank"
                       and r["assignment"] == graded.case.name)
    assert (csv_row["status"], csv_row["detail"]) == ("blank", BLANK_REASON)
    line = next(ln for ln in graded.report.splitlines() if ln.strip().startswith("blank "))
    assert line.endswith(f" blank: {BLANK_REASON}"), line
    assert STATUS_WORDS["blank"] == BLANK_REASON
    text = (graded.out / "feedback" / "blank" / f"{graded.case.name}.md").read_text()
    assert f"**Blank submission**: {BLANK_REASON}." in text


def test_only_the_blank_release_is_blank(graded):
    """The model answer and every wrong-answer submission change answer cells (so none could
    be blank even if it scored 0) and are graded; the blank release changes none."""
    name = graded.case.name
    release = wrong_answers.read(graded.root / "release" / name / f"{name}.ipynb")
    students = ["solution"] + [f"wrong-{i}" for i in range(1, len(graded.batches) + 1)]
    for student in students:
        nb = wrong_answers.read(graded.submissions / student / name / f"{name}.ipynb")
        assert answers_changed(nb, release), f"{student} changes no answer cell"
        assert graded.results[student]["status"] == "graded", graded.results[student]
    blank = wrong_answers.read(graded.submissions / "blank" / name / f"{name}.ipynb")
    assert answers_changed(blank, release) == []


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
    assert list(rows[0]) == ["student", "assignment", "score", "max_score", "status", "detail",
                            "lms_id", "name", "late"]
    students = sorted(p.name for p in graded.submissions.iterdir())
    assert sorted(r["student"] for r in rows) == students  # one row per student
    points = sum(wrong_answers.graded_cells(_source(graded.case)).values())
    for r in rows:
        assert float(r["max_score"]) == points
        if r["status"] in ("graded", "blank", "timeout", "kernel_died"):  # cells that ran count
            assert float(r["score"]) == sum(s for s, _ in graded.cell_scores(r["student"]).values())
        else:  # not run: no submission in the gradebook
            assert float(r["score"]) == 0 and r["detail"]
        if r["status"] != "graded":
            assert r["detail"], r


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
        page = (graded.out / "feedback" / student / f"{graded.case.name}.html").read_text()
        assert (f"{graded.case.name}: {row['score']:g} / {row['max_score']:g} points"
                in page_text(page)), f"{student}: no total on the HTML page"
        assert "BEGIN HIDDEN" not in page
        shown = shown_hidden(page, secret)
        assert not shown, f"HTML feedback of {student} shows hidden test code: {shown}"
        if row["status"] not in ("graded", "blank"):
            continue
        for gid, (score, max_score) in graded.cell_scores(student).items():
            assert f"| `{gid}` | {score:g} / {max_score:g} |" in text, (student, gid)
            assert f"{gid}: {score:g} / {max_score:g} points" in page_text(page), (student, gid)
            if score < max_score:
                assert f"### `{gid}` (" in text, f"{student}: no section on the failed {gid}"


def test_grading_leaves_submissions_untouched(graded):
    d = graded.digests
    assert d["before"]["submissions"] == d["after"]["submissions"]
    assert d["before"]["submissions"], "no submissions were hashed"
    # the command checks it too, with the gradebook's assignment definition
    assert "verified: the submissions, the graded assignments' source, course_lib and the " \
           "gradebook's assignment definition are unchanged" in graded.report
    assert "WARNING" not in graded.report


def test_course_lib_changes_are_seen_but_not_its_byte_code(tmp_path, monkeypatch):
    """A kernel could rewrite course_lib, which every later kernel imports: the command hashes
    it before and after (byte-code caches that kernels write aside)."""
    import types

    from course_tools import integrity as G

    pkg = tmp_path / "course_lib"
    (pkg / "checks").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "checks" / "records.py").write_text("def same_record(a, b):\n    return a == b\n")
    monkeypatch.setitem(sys.modules, "course_lib",
                        types.SimpleNamespace(__file__=str(pkg / "__init__.py")))
    before = G.course_lib_digest()
    assert sorted(before) == ["__init__.py", "checks/records.py"]
    (pkg / "checks" / "__pycache__").mkdir()
    (pkg / "checks" / "__pycache__" / "records.cpython-311.pyc").write_bytes(b"\0")
    assert G.course_lib_digest() == before
    (pkg / "checks" / "records.py").write_text("def same_record(a, b):\n    return True\n")
    assert G.changed(before, G.course_lib_digest()) == {"checks/records.py"}


def test_nbgrader_and_the_grader_agree_on_honest_submissions(graded):
    """nbgrader's own determine_grade (in the worker, stderr and partial credit set aside)
    gives the same cell scores as the grader's comparison with the model answer."""
    honest = ["solution", "blank"] + [f"wrong-{i}" for i in range(1, len(graded.batches) + 1)]
    for student in honest:
        row = graded.results[student]
        mine = {f"{c['notebook']}/{c['grade_id']}": c["score"] for c in row["cells"]}
        assert row["nbgrader_scores"] == mine, student


# --- the class: broken and hostile submissions -----------------------------------------

def _cells_of(graded, student) -> dict[str, float]:
    return {gid: s for gid, (s, _) in graded.cell_scores(student).items()}


def test_every_student_has_a_row_and_a_reason(class_graded):
    g = class_graded
    students = sorted(p.name for p in g.submissions.iterdir())
    assert sorted(g.results) == students
    report = g.report.splitlines()
    for kind in g.kinds:
        row = g.results[kind.student]
        assert row["status"] == kind.status, (kind.student, kind.why, row["status"], row["detail"])
        for phrase in kind.detail:
            assert phrase in row["detail"], (kind.student, phrase, row["detail"])
        if row["status"] != "graded":
            assert row["detail"], kind.student
        line = next(ln for ln in report if ln.strip().startswith(kind.student + " "))
        assert f" {row['status']}" in line and row["detail"][:60] in line, line


def test_good_and_hostile_submissions_score_what_they_answered(class_graded):
    """Noise costs nothing; tricks earn nothing: each student's cells score exactly what the
    registry says its answers earn (partly-wrong's), or 0 where its trick silenced the checks."""
    g = class_graded
    release, _ = g._release_and_source()
    points = wrong_answers.graded_cells(release)
    reporting = {k.split("/", 1)[1] for k, recs in g.reference.items() if recs}
    errors = []
    for kind in g.kinds:
        if kind.status in ("invalid_json", "invalid_notebook", "misnamed", "missing",
                           "bad_student_id"):
            assert g.results[kind.student]["score"] == 0
            continue
        want = grading_class.expected_scores(kind, points, list(g.case.wrongs), release, reporting)
        got = _cells_of(g, kind.student)
        if got != want:
            errors.append(f"{kind.student} ({kind.why}): {grading_class.dumps(got)} != "
                          f"expected {grading_class.dumps(want)}")
        assert g.results[kind.student]["score"] == sum(want.values())
    assert not errors, "\n".join(errors)


def test_the_tricks_work_in_the_kernel(class_graded):
    """The hostile tricks are real: nbgrader's own view of the cells (what the kernel said)
    would have given them points the grader does not."""
    g = class_graded
    for student in ("patch-isclose", "patch-checks", "hijack"):
        row = g.results[student]
        kernel = sum(v or 0 for v in row["nbgrader_scores"].values())
        assert kernel > row["score"], (student, kernel, row["score"])


def test_noise_is_noted_not_penalised(class_graded):
    text = (class_graded.out / "feedback" / "noisy" / f"{class_graded.case.name}.md").read_text()
    assert "wrote to stderr during this test" in text and "not held against you" in text
    assert "Every test passed." in text


def test_settings_the_lab_rewrote_without_meaning_cost_nothing_and_say_nothing(class_graded):
    """A correct submission whose every graded cell lost nbgrader's ``cell_type`` (what
    JupyterLab's Create Assignment panel does when merely opened) is graded in full, with no
    note in its row, the report or its feedback."""
    g = class_graded
    row = g.results[grading_class.LAB_PANEL]
    assert (row["status"], row["score"], row["detail"]) == ("graded", row["max_score"], ""), row
    line = next(ln for ln in g.report.splitlines()
                if ln.strip().startswith(grading_class.LAB_PANEL + " "))
    assert "restored" not in line and "changed" not in line, line
    text = (g.out / "feedback" / grading_class.LAB_PANEL / f"{g.case.name}.md").read_text()
    assert "Every test passed." in text and "restored" not in text and "settings" not in text


def test_output_is_capped(class_graded):
    g = class_graded
    nb = g.out / "course" / "autograded" / "flood" / g.case.name / f"{g.case.name}.ipynb"
    assert nb.stat().st_size < 3 * 2**20, nb.stat().st_size  # 10 MB were printed
    assert "cut by the grader" in nb.read_text()
    assert (g.out / "course" / "gradebook.db").stat().st_size < 2 * 2**20
    assert max(p.stat().st_size for p in (g.out / "logs").rglob("*.log")) < 2**20


def test_feedback_of_hostile_submissions_says_what_went_wrong(class_graded):
    g = class_graded
    text = (g.out / "feedback" / "hijack" / f"{g.case.name}.md").read_text()
    assert "did not report the results the grader expects" in text
    text = (g.out / "feedback" / "stuck" / f"{g.case.name}.md").read_text()
    assert "ignored the interrupt" in text and "not run" in text


def test_the_class_leaves_submissions_and_gradebook_untouched(class_graded):
    d = class_graded.digests
    assert d["before"]["submissions"] == d["after"]["submissions"]
    assert len(d["before"]["submissions"]) >= len(class_graded.kinds)
    assert "verified:" in class_graded.report and "WARNING" not in class_graded.report
    assert "submissions/minute" in class_graded.report


# --- the mini course: budget, jobs, alone, command line ---------------------------------

def test_a_notebook_over_its_budget_is_stopped(mini_graded):
    row = mini_graded.results["over-budget"]
    budget = MINI_SETTINGS["notebook_timeout"]
    assert row["status"] == "timeout"
    assert row["detail"] == f"timed out in q-square: the notebook ran past its {budget:g} s budget"
    # what finished before counts, what did not run scores 0
    assert mini_graded.cell_scores("over-budget") == {
        "t-double": (2, 2), "t-square": (0, 3), "t-both": (0, 1)}
    assert row["seconds"] < budget + 10


def test_a_cell_past_the_memory_limit_fails_alone(mini_graded):
    """A cell that asks for more memory than the limit gets a MemoryError; the notebook goes
    on, and what does not depend on that cell keeps its points."""
    row = mini_graded.results["memory-hog"]
    assert row["status"] == "graded", row["detail"]
    assert mini_graded.cell_scores("memory-hog") == {
        "t-double": (2, 2), "t-square": (0, 3), "t-both": (0, 1)}
    text = (mini_graded.out / "feedback" / "memory-hog" / "mini.md").read_text()
    assert "MemoryError" in text and "limits the memory a notebook may use" in text, text
    assert row["detail"] == ("answer cell(s) q-square raised an error (its message: the feedback's 'Answer cells "
                             "that raised an error')"), row


def test_a_cell_that_kills_the_kernel_fails_alone(mini_graded):
    """A cell that kills its kernel (os._exit) loses what uses it, as a timeout would: a new
    kernel re-runs the cells before it and runs the cells after it."""
    row = mini_graded.results["kernel-killer"]
    assert row["status"] == "kernel_died", row["detail"]
    assert row["detail"] == ("kernel died in q-double; a new kernel ran the cells after it "
                             "(those before it run again first)"), row
    assert mini_graded.cell_scores("kernel-killer") == {
        "t-double": (0, 2), "t-square": (3, 3), "t-both": (0, 1)}
    cells = {c["grade_id"]: c["message"] for c in row["cells"]}
    assert cells["t-double"] == ("NameError: name 'double' is not defined\n(the kernel died in "
                                 "q-double: a new kernel ran this test without what that cell "
                                 "defines)"), cells


def test_nearly_blank_submissions(mini_graded):
    """Only a notebook whose answer cells are as released *and* that earns nothing is blank:
    an answer written in a cell of its own that passes a test, or one answer cell changed
    (even if wrong), keeps the status ``graded``."""
    for student, (_, _, status, score) in MINI_NEARLY_BLANK.items():
        row = mini_graded.results[student]
        assert (row["status"], row["score"]) == (status, score), (student, row["detail"])
    assert mini_graded.results["elsewhere-wrong"]["detail"] == (
        "no answer cell was changed from the release (it has 1 code cell the release does "
        "not have, but no test passed)")
    assert mini_graded.cell_scores("answered-elsewhere")["t-double"] == (2, 2)



def test_an_answer_cell_left_as_released_is_not_answered_not_an_error():
    """A test-yourself stub (``raise NotImplementedError()`` at the top level) left as released raises when it
    runs: the instructor's notes call it not answered, and only a changed cell's error the learner's (the
    newcomer trial's finding: both read "raised an error")."""
    from course_tools.grade import answer_error_notes

    assert answer_error_notes({"q-tys1": "NotImplementedError", "q-x": "ValueError: ..."}, ["q-x", "q-y"]) == [
        "answer cell(s) q-tys1 were not answered (still the release's stub)",
        "answer cell(s) q-x raised an error (its message: the feedback's 'Answer cells that raised an error')"]
    assert answer_error_notes({}, ["q-x"]) == [] and answer_error_notes({"q-x": "e"}, ["nb/q-x"])[0].endswith(
        "raised an error (its message: the feedback's 'Answer cells that raised an error')")


def test_blank_detection_on_a_hand_built_notebook():
    """course_tools.intake.answers_changed / added_cells and grade.blank_words, no kernel."""
    from course_tools.feedback import CellResult
    from course_tools.grade import blank_words
    from course_tools.intake import added_cells

    def cell(source, **nbgrader):
        c = nbformat.v4.new_code_cell(source)
        if nbgrader:
            c.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False,
                                      "locked": False, "task": False, **nbgrader}
        return c

    stub = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    release = nbformat.v4.new_notebook(cells=[
        cell("import math", grade_id="setup", locked=True),
        cell(stub, grade_id="q-f", solution=True),
        cell("assert f(1) == 2", grade_id="t-f", grade=True, locked=True, points=1),
        cell("g = None", grade_id="q-g", solution=True),
        nbformat.v4.new_markdown_cell("Notes"),
    ])
    nb = copy.deepcopy(release)
    nb.cells[1].source = "\n  " + stub + "\n\n"  # whitespace at the ends only
    nb.cells[2].source = "pass"  # a test cell is not an answer cell (and is restored)
    nb.cells[4].source = "my notes"  # nor is markdown
    assert answers_changed(nb, release) == [] and added_cells(nb, release) == 0
    nb.cells[3].source = "g = 7"
    assert answers_changed(nb, release) == ["q-g"]
    nb.cells[3].source = "g = None"
    nb.cells[1].source = stub.replace("    raise", "    return 2 * x\n    raise")
    assert answers_changed(nb, release) == ["q-f"]  # a change inside counts

    nb = copy.deepcopy(release)
    nb.cells.insert(2, cell("def f(x):\n    return x + 1"))
    nb.cells.insert(3, cell("   "))  # blank: not counted
    nb.cells.insert(4, cell("import math"))  # a copy of a release cell: not counted
    assert answers_changed(nb, release) == [] and added_cells(nb, release) == 1

    zero, one = CellResult("t-f", "nb", 0.0, 1.0), CellResult("t-f", "nb", 1.0, 1.0)
    assert blank_words(2, [], 0, [zero]) == BLANK_REASON
    assert blank_words(2, [], 1, [zero]) == (BLANK_REASON + " (it has 1 code cell the release "
                                             "does not have, but no test passed)")
    assert blank_words(2, [], 1, [one]) == ""  # answered elsewhere and passed
    assert blank_words(2, ["q-g"], 0, [zero]) == ""  # partly blank is not blank
    assert blank_words(0, [], 0, [zero]) == ""  # no answer cells: nothing to leave blank


def test_jobs_and_grading_alone_change_no_grade(mini_graded, tmp_path, monkeypatch):
    """Two jobs give the CSV one job gave; a student graded alone (here through the
    subprocess workers used where there is no fork) scores as in the class."""
    from course_tools.grade import grade

    subs = tmp_path / "subs"
    shutil.copytree(mini_graded.submissions, subs)
    shutil.rmtree(subs / "over-budget")  # timing-dependent by design
    settings = {**MINI_SETTINGS, "notebook_timeout": 120}
    grade(subs, tmp_path / "two", ["mini"], mini_graded.case.course, echo=lambda *a: None,
          **{**settings, "jobs": 2})
    with open(mini_graded.out / "grades.csv", newline="") as f:
        one = [r for r in csv.reader(f) if r[0] != "over-budget"]
    with open(tmp_path / "two" / "grades.csv", newline="") as f:
        assert list(csv.reader(f)) == one

    alone = tmp_path / "alone"
    shutil.copytree(subs / "wrong-2", alone / "wrong-2")
    monkeypatch.setenv("COURSE_GRADE_SPAWN", "subprocess")
    grade(alone, tmp_path / "out-alone", ["mini"], mini_graded.case.course,
          echo=lambda *a: None, **settings)
    with open(tmp_path / "out-alone" / "grades.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [one[0], next(r for r in one if r[0] == "wrong-2")]


def test_two_classes_graded_at_once_score_as_each_alone(mini_graded, tmp_path):
    """An instructor who starts two gradings on one machine (two `make grade`) gets from each
    the grades it gets alone.  The small class finishes first, and its clean-up (leftover job
    cgroups, tagged processes) runs while the big one still grades: a sweep that is not scoped
    to its own run would kill the other's kernels, and their students would lose points."""
    from course_tools import sandbox

    with open(mini_graded.out / "grades.csv", newline="") as f:
        alone = {r["student"]: r for r in csv.DictReader(f)}
    big, small = tmp_path / "big", tmp_path / "small"
    shutil.copytree(mini_graded.submissions, big)
    shutil.rmtree(big / "over-budget")  # timing-dependent by design
    for student in sorted(p.name for p in big.iterdir())[:2]:
        shutil.copytree(big / student, small / student)
    settings = ["--course", str(mini_graded.case.course), "--cell-timeout", "120",
                "--notebook-timeout", "240", "--memory-limit", "4"]
    runs = {}
    try:
        for name, subs, jobs in (("big", big, "2"), ("small", small, "1")):
            runs[name] = subprocess.Popen(
                [sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                 str(tmp_path / f"out-{name}"), "--jobs", jobs, *settings],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        done = {name: (p.communicate(timeout=900), p.returncode) for name, p in runs.items()}
    finally:
        for p in runs.values():
            p.kill()
    for name, ((out, err), code) in done.items():
        assert code == 0, f"the {name} class: exit {code}\n{out[-2000:]}\n{err[-2000:]}"
        with open(tmp_path / f"out-{name}" / "grades.csv", newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        subs = big if name == "big" else small
        assert set(rows) == {p.name for p in subs.iterdir()}
        for student, row in rows.items():
            got = {k: row[k] for k in ("status", "score", "max_score")}
            want = {k: alone[student][k] for k in ("status", "score", "max_score")}
            assert got == want, f"the {name} class, {student}: {got}, alone {want}\n{row}"
        assert sandbox.leftover_cgroups(f"course-grade-{runs[name].pid}-") == []


def test_grading_leaves_the_course_untouched(mini_graded):
    d = mini_graded.digests
    assert d["before"]["course"] == d["after"]["course"] and d["before"]["course"]


def test_feedback_gives_the_failed_tests_message(mini_graded):
    text = (mini_graded.out / "feedback" / "wrong-2" / "mini.md").read_text()
    # the hidden test's message is shown, its code and values are not
    assert "> AssertionError: double must keep the sign of a negative x" in text
    assert "-42" not in text and "-21" not in text
    blank = (mini_graded.out / "feedback" / "blank" / "mini.md").read_text()
    assert "NotImplementedError: an answer this test uses is not written yet" in blank


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
                           str(out), "--jobs", "2", *course], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ann" in done.stdout and "invalid_json" in done.stdout and "missing" in done.stdout
    assert "submissions/minute" in done.stdout and "with 2 job(s)" in done.stdout
    assert (out / "report.txt").read_text().strip() in done.stdout
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
    assert grade_main([str(subs), "--out", str(out), "--jobs", "0", *course]) == 2
    assert "--jobs must be" in capsys.readouterr().err


def test_a_checkout_whose_kernels_import_another_course_lib_is_refused_in_one_line(tmp_path):
    """Two checkouts sharing one environment, whose editable install points at the other: kernels would import
    a course_lib the sandbox does not show (every notebook failing with a NameError that blamed the course)
    and checks other than those the grader compares with.  Grading stops before it starts, naming both."""
    other = tmp_path / "checkout"
    for d in ("course_lib", "course_tools"):
        shutil.copytree(REPO / d, other / d, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "subs").mkdir()
    run = subprocess.run([sys.executable, "-m", "course_tools.grade", str(tmp_path / "subs"), "--out",
                          str(tmp_path / "out"), "--course", str(REPO)], cwd=other, capture_output=True,
                         text=True, timeout=300)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert f"import course_lib from {REPO / 'course_lib'}, not this grader's {other / 'course_lib'}" in lines[0]
    assert f"make .venv/.installed in {other}" in lines[0] and not (tmp_path / "out").exists()
