"""LMS downloads graded end to end (course_tools.grade with course_tools.lms): a Canvas zip and
a Moodle folder made from the mini class's notebooks grade to the scores the nbgrader layout
got (fixture ``mini_graded``), under the LMS's ids, with the late, resubmitted, renamed and
missing (roster) cases, and the LMS files written.  Kept small: four notebooks a run."""
from __future__ import annotations

import csv
import io
import zipfile

import pytest

from conftest import CANVAS_EXPORT, MINI_SETTINGS, MINI_WRONG, MOODLE_WORKSHEET, Case, _graded
from scans import page_text


SETTINGS = {**MINI_SETTINGS, "jobs": 2, "notebook_timeout": 120}


def _nb(g, student: str) -> bytes:
    return (g.submissions / student / "mini" / "mini.ipynb").read_bytes()


def _csv(path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def _cells(out, student):
    import json
    rows = json.loads((out / "results.json").read_text())
    row = next(r for r in rows if r["student"] == student)
    return {c["grade_id"]: c["score"] for c in row["cells"]}, row


@pytest.fixture(scope="module")
def canvas_run(tmp_path_factory, mini_course):
    from course_tools.grade import grade

    g = _graded(Case("mini", mini_course, tuple(MINI_WRONG), True), tmp_path_factory)
    root = tmp_path_factory.mktemp("canvas")
    z = root / "submissions.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        base = "mini - Download Submissions/"
        zf.writestr(base + "lovelaceada_12345_9001_mini.ipynb", _nb(g, "solution"))
        # late, uploaded twice: the blank first, wrong-1 again (Canvas names it mini-1)
        zf.writestr(base + "turingalan_late_12346_9002_mini.ipynb", _nb(g, "blank"))
        zf.writestr(base + "turingalan_late_12346_9003_mini-1.ipynb", _nb(g, "wrong-1"))
        # saved by the browser as "mini (1).ipynb"
        zf.writestr(base + "hoppergrace_12347_9004_mini (1).ipynb", _nb(g, "wrong-2"))
        # uploaded again, cut short: not JSON (staged as mini.ipynb; the row names the upload)
        zf.writestr(base + "smithjo_12349_9005_mini-1.ipynb", _nb(g, "solution")[:300])
    export = root / "export.csv"
    export.write_text(CANVAS_EXPORT.replace("lesson1 (1002)", "mini (1002)").replace(
        '"Hopper, Grace",12347,S3,grace,Sec B,,,0,0\n',
        '"Hopper, Grace",12347,S3,grace,Sec B,,,0,0\n"Knuth, Don",12348,S4,don,Sec B,,,0,0\n'
        '"Smith, Jo",12349,S5,jo,Sec B,,,0,0\n'))
    lines: list[str] = []
    grade(z, root / "out", None, g.case.course, echo=lambda *a: lines.append(" ".join(map(str, a))),
          roster=export, canvas_gradebook=export, **SETTINGS)
    return g, root / "out", "\n".join(lines), {"12345": "solution", "12346": "wrong-1",
                                              "12347": "wrong-2"}


def test_a_canvas_zip_grades_as_the_nbgrader_layout(canvas_run):
    g, out, report, same = canvas_run
    rows = {r["student"]: r for r in _csv(out / "grades.csv")}
    assert sorted(rows) == ["12345", "12346", "12347", "12348", "12349"]
    for lms_id, student in same.items():
        want, ref = _cells(g.out, student)
        got, row = _cells(out, lms_id)
        assert got == want and row["score"] == ref["score"], (lms_id, student, got, want)
        assert rows[lms_id]["status"] == "graded" and rows[lms_id]["lms_id"] == lms_id
    assert rows["12346"]["late"] == "yes" and rows["12345"]["late"] == "no"
    assert "late" in rows["12346"]["detail"] and "graded mini-1.ipynb" in rows["12346"]["detail"]
    assert "graded mini (1).ipynb" in rows["12347"]["detail"]
    assert rows["12345"]["name"] == "Lovelace, Ada"  # the roster's name
    assert rows["12348"]["status"] == "missing" and rows["12348"]["score"] == "0"
    # on the roster only: said in the instructor's words, and not late (nothing was sent)
    assert rows["12348"]["detail"] == "no submission (on the roster, nothing in the download)"
    assert rows["12348"]["late"] == "no"
    # a problem with a file names the file the student sent, not the name it was graded as
    assert rows["12349"]["status"] == "invalid_json", rows["12349"]
    assert "smithjo_12349_9005_mini-1.ipynb is not valid JSON" in rows["12349"]["detail"]
    assert "mini.ipynb is not" not in rows["12349"]["detail"]
    assert ("submissions: canvas layout, 5 student(s) (4 submitted, 1 on the roster only), "
            "mini, 1 late") in report
    assert (out / "feedback" / "12347" / "mini.html").is_file()


def test_the_canvas_import_file_carries_the_scores(canvas_run):
    g, out, _, same = canvas_run
    rows = list(csv.reader(io.StringIO((out / "lms" / "canvas-mini.csv").read_text())))
    header = rows[0]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    col = header.index("mini (1002)")
    assert rows[1][0].strip() == "Points Possible" and rows[1][col] == "6"
    scores = {r["student"]: r["score"] for r in _csv(out / "grades.csv")}
    assert {r[1]: r[col] for r in rows[2:]} == scores


@pytest.fixture(scope="module")
def moodle_run(tmp_path_factory, mini_course):
    from course_tools.grade import grade

    g = _graded(Case("mini", mini_course, tuple(MINI_WRONG), True), tmp_path_factory)
    root = tmp_path_factory.mktemp("moodle")
    subs = root / "download"
    for folder, student, name in [("Ada Lovelace_501", "wrong-2", "mini.ipynb"),
                                  ("Alan Turing_502", "solution", "Copy of mini.ipynb")]:
        d = subs / f"{folder}_assignsubmission_file_"
        d.mkdir(parents=True)
        (d / name).write_bytes(_nb(g, student))
    worksheet = root / "worksheet.csv"
    worksheet.write_text(MOODLE_WORKSHEET)
    grade(subs, root / "out", None, g.case.course, echo=lambda *a: None, roster=worksheet,
          **SETTINGS)
    return g, root / "out", {"501": "wrong-2", "502": "solution"}


def test_a_moodle_folder_grades_as_the_nbgrader_layout(moodle_run):
    g, out, same = moodle_run
    rows = {r["student"]: r for r in _csv(out / "grades.csv")}
    assert sorted(rows) == ["501", "502", "503"]
    for lms_id, student in same.items():
        want, ref = _cells(g.out, student)
        got, row = _cells(out, lms_id)
        assert got == want and row["score"] == ref["score"], (lms_id, student)
    assert rows["501"]["name"] == "Ada Lovelace" and rows["502"]["late"] == "yes"
    assert rows["503"]["status"] == "missing"
    sheet = _csv(out / "lms" / "moodle-mini.csv")
    assert list(sheet[0])[:5] == ["Identifier", "Full name", "Email address", "Status", "Grade"]
    assert {r["Identifier"]: r["Grade"] for r in sheet} == {
        "Participant 501": rows["501"]["score"], "Participant 502": rows["502"]["score"],
        "Participant 503": rows["503"]["score"]}
    text = page_text((out / "feedback" / "501" / "mini.html").read_text())
    assert f"mini: {float(rows['501']['score']):g} / 6 points" in text
