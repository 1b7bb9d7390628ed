"""LMS downloads in, LMS files out (course_tools.lms, course_tools.exports), without grading.

The layouts are the ones the LMSs document (see course_tools/lms.py): Canvas's bulk download
``<login>[_late]_<user id>_<submission id>_<file>`` with ``-N`` for a file uploaded again,
Moodle's ``<Full Name>_<id>_assignsubmission_file_/`` folders, nbgrader's
``<student>/<assignment>/``; the CSVs are read back with the column layouts Canvas's gradebook
import and Moodle's offline grading worksheet expect.
"""
from __future__ import annotations

import csv
import io
import json
import stat
import zipfile
from pathlib import Path

import pytest

from course_tools import exports, lms
from course_tools.feedback import CellResult, Report
from course_tools.intake import MISNAMED, USABLE, inspect_submission

import wrong_answers
from conftest import CANVAS_EXPORT, MOODLE_WORKSHEET

KNOWN = ["lesson1", "lesson2"]
NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _zip(path: Path, files: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


# --- layout detection ------------------------------------------------------------------------

def test_canvas_download_ids_late_and_resubmissions(tmp_path):
    src = _write(tmp_path / "dl", {
        "lovelaceada_12345_67890_lesson1.ipynb": NB,
        "turingalan_late_12346_67891_lesson1-1.ipynb": NB,
        "turingalan_late_12346_67892_lesson1-2.ipynb": NB,
        "hopperg_12347_67893_lesson1 (1).ipynb": NB,
        "hopperg_12347_67893_data.csv": "x\n",
        "readme.txt": "not a submission",
    })
    st = lms.stage(src, tmp_path / "w", KNOWN)
    assert st.layout == "canvas" and st.assignments == ["lesson1"]
    subs = {s.student: s for s in st.submissions}
    assert sorted(subs) == ["12345", "12346", "12347"]
    assert subs["12345"].late is False and subs["12346"].late is True
    assert subs["12345"].name == "lovelaceada"
    assert (st.root / "12345" / "lesson1" / "lesson1.ipynb").is_file()
    # the latest upload, under the assignment's name; the older one noted
    assert sorted(p.name for p in (st.root / "12346" / "lesson1").iterdir()) == ["lesson1.ipynb"]
    assert any("graded lesson1-2.ipynb" in n and "lesson1-1.ipynb" in n
               for n in subs["12346"].notes), subs["12346"].notes
    # a browser's rename is kept as it is (the intake grades it, with a note)
    assert sorted(p.name for p in (st.root / "12347" / "lesson1").iterdir()) == [
        "data.csv", "lesson1 (1).ipynb"]
    assert any("readme.txt" in n for n in st.notes)


def test_a_flat_download_is_told_by_its_notebooks_names(tmp_path):
    src = _write(tmp_path / "dl", {"adams_1_2_Copy of lesson2.ipynb": NB,
                                    "bell_3_4_lesson2 (1).ipynb": NB,
                                    "curie_5_6_lesson2-Copy1.ipynb": NB})
    assert lms.stage(src, tmp_path / "w", KNOWN).assignments == ["lesson2"]
    _write(src, {"dirac_7_8_lesson1.ipynb": NB})  # two assignments' names: cannot tell
    with pytest.raises(lms.LMSError, match="pass --assignment"):
        lms.stage(src, tmp_path / "w2", KNOWN)


def test_a_flat_download_needs_its_assignment(tmp_path):
    src = _write(tmp_path / "dl", {"lovelaceada_12345_67890_homework.ipynb": NB})
    with pytest.raises(lms.LMSError, match="pass --assignment"):
        lms.stage(src, tmp_path / "w", KNOWN)
    st = lms.stage(src, tmp_path / "w2", KNOWN, assignments=["lesson2"])
    assert st.assignments == ["lesson2"]
    assert (st.root / "12345" / "lesson2" / "homework.ipynb").is_file()
    with pytest.raises(lms.LMSError, match=r"unknown assignment\(s\) lesson9"):
        lms.stage(src, tmp_path / "w3", KNOWN, assignments=["lesson9"])


def test_moodle_download_folders_and_flat_files(tmp_path):
    src = _write(tmp_path / "dl", {
        "Ada Lovelace_501_assignsubmission_file_/lesson1.ipynb": NB,
        "Alan Turing_502_assignsubmission_file_/Copy of lesson1.ipynb": NB,
        "Alan Turing_502_assignsubmission_onlinetext_/onlinetext.html": "<p>hi</p>",
        "Grace Hopper_503_assignsubmission_file_lesson1.ipynb": NB,
    })
    st = lms.stage(src, tmp_path / "w", KNOWN)
    assert st.layout == "moodle" and st.assignments == ["lesson1"]
    subs = {s.student: s for s in st.submissions}
    assert sorted(subs) == ["501", "502", "503"]
    assert subs["501"].name == "Ada Lovelace" and subs["501"].late is None
    assert (st.root / "502" / "lesson1" / "Copy of lesson1.ipynb").is_file()
    assert (st.root / "503" / "lesson1" / "lesson1.ipynb").is_file()


def test_nbgrader_layout_exchange_and_plain(tmp_path):
    nbg = _write(tmp_path / "course", {"submitted/ada/lesson1/lesson1.ipynb": NB,
                                        "submitted/bob/lesson2/lesson2.ipynb": NB})
    st = lms.stage(nbg, tmp_path / "w1", KNOWN)
    assert st.layout == "nbgrader" and st.assignments == ["lesson1", "lesson2"]
    assert (st.root / "ada" / "lesson1" / "lesson1.ipynb").is_file()
    plain = _write(tmp_path / "plain", {"ada.ipynb": NB, "bob.ipynb": NB})
    st = lms.stage(plain, tmp_path / "w2", KNOWN, assignments=["lesson1"])
    assert st.layout == "plain"
    assert sorted(s.student for s in st.submissions) == ["ada", "bob"]
    assert (st.root / "bob" / "lesson1" / "lesson1.ipynb").is_file()
    with pytest.raises(lms.LMSError, match="pass --assignment"):
        lms.stage(plain, tmp_path / "w3", KNOWN)
    # forced: the same files read as a Canvas download find no Canvas name
    with pytest.raises(lms.LMSError, match="pass --assignment"):
        lms.stage(plain, tmp_path / "w4", KNOWN, layout="canvas")
    with pytest.raises(lms.LMSError, match="unknown --layout"):
        lms.stage(plain, tmp_path / "w5", KNOWN, layout="blackboard")
    (tmp_path / "empty").mkdir()
    with pytest.raises(lms.LMSError, match="cannot tell the layout"):
        lms.stage(tmp_path / "empty", tmp_path / "w6", KNOWN)


def test_a_zip_of_a_folder_is_unwrapped(tmp_path):
    z = _zip(tmp_path / "submissions.zip", {
        "Lesson 1 - submissions/lovelaceada_12345_67890_lesson1.ipynb": NB,
        "__MACOSX/._junk": "x"})
    st = lms.stage(z, tmp_path / "w", KNOWN)
    assert st.layout == "canvas" and [s.student for s in st.submissions] == ["12345"]
    assert str(st.root).startswith(str(tmp_path / "w"))


def test_roster_gives_every_enrolled_student_a_row(tmp_path):
    src = _write(tmp_path / "dl", {"lovelaceada_12345_67890_lesson1.ipynb": NB})
    roster = tmp_path / "export.csv"
    roster.write_text(CANVAS_EXPORT)
    st = lms.stage(src, tmp_path / "w", KNOWN, roster=roster)
    subs = {s.student: s for s in st.submissions}
    assert sorted(subs) == ["12345", "12346", "12347"]
    assert subs["12345"].name == "Lovelace, Ada"  # the roster's name over the login
    # nothing sent: marked so (the grade command says "no submission"); not late, as Canvas
    # flags each file it holds late or not
    assert subs["12347"].roster_only and not subs["12345"].roster_only
    assert (subs["12347"].late, subs["12345"].late) == (False, False)
    assert (st.root / "12347").is_dir() and not any((st.root / "12347").iterdir())
    # the intake line counts who sent something apart from who is only on the roster
    assert st.summary() == ("submissions: canvas layout, 3 student(s) (1 submitted, 2 on the "
                            "roster only), lesson1")
    moodle = tmp_path / "worksheet.csv"
    moodle.write_text(MOODLE_WORKSHEET)
    assert [(e.lms_id, e.name, e.late) for e in lms.read_roster(moodle)] == [
        ("501", "Ada Lovelace", False), ("502", "Alan Turing", True), ("503", "Grace Hopper", False)]
    bad = tmp_path / "bad.csv"
    bad.write_text("who,what\nx,y\n")
    with pytest.raises(lms.LMSError, match="cannot find the students' ids"):
        lms.read_roster(bad)


# --- safe zip --------------------------------------------------------------------------------

def _hostile(tmp_path, name: str, info: zipfile.ZipInfo, data: bytes = b"x") -> Path:
    z = tmp_path / name
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("ok_1_2_lesson1.ipynb", NB)
        zf.writestr(info, data)
    return z


@pytest.mark.parametrize("entry, message", [
    ("/etc/evil.txt", "absolute path"),
    ("../evil.txt", "climbs out"),
    ("a/../../evil.txt", "climbs out"),
    ("..\\evil.txt", "climbs out"),
    ("C:/evil.txt", "absolute path"),
])
def test_a_zip_climbing_out_is_refused(tmp_path, entry, message):
    z = _hostile(tmp_path, "h.zip", zipfile.ZipInfo(entry))
    dest = tmp_path / "dest" / "x"
    with pytest.raises(lms.LMSError, match=message) as exc:
        lms.safe_extract(z, dest)
    assert "\n" not in str(exc.value)
    assert not dest.exists() and not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "dest" / "evil.txt").exists()


def test_a_zip_with_a_symlink_is_refused(tmp_path):
    info = zipfile.ZipInfo("link.ipynb")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    z = _hostile(tmp_path, "l.zip", info, b"/etc/passwd")
    with pytest.raises(lms.LMSError, match="symbolic link"):
        lms.safe_extract(z, tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_decompression_bombs_are_refused(tmp_path):
    z = _zip(tmp_path / "bomb.zip", {"a_1_2_lesson1.ipynb": b"\0" * (3 * 2**20)})
    assert z.stat().st_size < 50_000
    with pytest.raises(lms.LMSError, match="decompression bomb"):
        lms.safe_extract(z, tmp_path / "d1", max_entry=2**20)
    with pytest.raises(lms.LMSError, match="in all"):
        lms.safe_extract(z, tmp_path / "d2", max_total=2**20)
    many = _zip(tmp_path / "many.zip", {f"f{i}.txt": "x" for i in range(30)})
    with pytest.raises(lms.LMSError, match="30 entries"):
        lms.safe_extract(many, tmp_path / "d3", max_entries=20)
    assert not any((tmp_path / d).exists() for d in ("d1", "d2", "d3"))
    with pytest.raises(lms.LMSError, match="not a readable zip"):
        (tmp_path / "fake.zip").write_text("hello")
        lms.safe_extract(tmp_path / "fake.zip", tmp_path / "d4")


# --- renamed notebooks (course_tools.intake) --------------------------------------------------

@pytest.fixture
def mini(mini_course):
    release = wrong_answers.read(mini_course / "notebooks" / "mini" / "mini.ipynb")
    source = wrong_answers.read(mini_course / "solutions" / "mini" / "mini.ipynb")
    return release, wrong_answers.solution_submission(release, source)


@pytest.mark.parametrize("name", ["mini (1).ipynb", "Copy of mini.ipynb", "mini-Copy1.ipynb",
                                  "Untitled.ipynb"])
def test_the_only_notebook_is_graded_under_any_name(mini, tmp_path, name):
    release, solution = mini
    d = tmp_path / "ann" / "mini"
    d.mkdir(parents=True)
    (d / name).write_text(json.dumps(solution))
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == USABLE and list(i.notebooks) == ["mini"]
    assert i.notes == [f"graded {name}, the only notebook in mini/ (expected the name "
                       "mini.ipynb)"]
    (d / "mini (2).ipynb").write_text(json.dumps(solution))
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == MISNAMED and name in i.detail and "mini (2).ipynb" in i.detail


# --- CSVs ------------------------------------------------------------------------------------



def _reports(assignment="lesson1"):
    return [Report("12345", assignment, "graded", score=9, max_score=10, lms_id="12345",
                   name="Lovelace, Ada", late=False,
                   cells=[CellResult("t-a", "lesson1", 9, 10)]),
            Report("12346", assignment, "graded", score=6.5, max_score=10, lms_id="12346",
                   name="Turing, Alan", late=True),
            Report("99999", assignment, "missing", score=0, max_score=10, lms_id="99999")]


def _rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


def test_grades_csv_has_the_lms_columns(tmp_path):
    exports.write_grades_csv(tmp_path / "g.csv", _reports())
    rows = list(csv.DictReader(io.StringIO((tmp_path / "g.csv").read_text())))
    assert list(rows[0]) == ["student", "assignment", "score", "max_score", "status", "detail",
                             "lms_id", "name", "late"]
    assert [(r["lms_id"], r["name"], r["late"], r["score"]) for r in rows] == [
        ("12345", "Lovelace, Ada", "no", "9"), ("12346", "Turing, Alan", "yes", "6.5"),
        ("99999", "", "", "0")]


def test_canvas_gradebook_column_updated(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text(CANVAS_EXPORT)
    notes = exports.write_canvas_gradebook(export, _reports(), "lesson1", tmp_path / "c.csv")
    rows = _rows(tmp_path / "c.csv")
    header = rows[0]
    assert header[:5] == list(exports.CANVAS_LEADING)
    assert header == CANVAS_EXPORT.splitlines()[0].split(",")  # updated in place, no new column
    col = header.index("lesson1 (1002)")
    assert rows[1][0].strip() == "Points Possible" and rows[1][col] == "10"
    by_id = {r[1]: r for r in rows[2:]}
    assert by_id["12345"][col] == "9" and by_id["12346"][col] == "6.5"
    assert by_id["12347"][col] == ""  # not graded here: left as exported
    assert by_id["12346"][header.index("Lesson 0 (1001)")] == "4"  # other columns kept
    assert any("99999" in n and "not in the export" in n for n in notes)
    assert any("Hopper, Grace" in n for n in notes)


def test_canvas_gradebook_column_added(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text(CANVAS_EXPORT)
    exports.write_canvas_gradebook(export, _reports("lesson2"), "lesson2", tmp_path / "c.csv")
    rows = _rows(tmp_path / "c.csv")
    header = rows[0]
    assert header[:5] == list(exports.CANVAS_LEADING)
    col = header.index("lesson2")
    assert header[col + 1] == "Current Points"  # before Canvas's read-only totals
    assert rows[1][col] == "10" and {r[1]: r[col] for r in rows[2:]} == {
        "12345": "9", "12346": "6.5", "12347": ""}
    bad = tmp_path / "bad.csv"
    bad.write_text("Name,Score\nx,1\n")
    with pytest.raises(exports.ExportError, match="not a Canvas gradebook export: no column "
                                                  "Student, ID, SIS User ID"):
        exports.write_canvas_gradebook(bad, _reports(), "lesson1", tmp_path / "x.csv")


def test_moodle_worksheet_from_scratch_and_filled(tmp_path):
    reps = [Report("501", "lesson1", "graded", score=7, max_score=10, lms_id="501",
                   name="Ada Lovelace"),
            Report("502", "lesson1", "graded", score=10, max_score=10, lms_id="502",
                   name="Alan Turing", late=True),
            Report("ann", "lesson1", "graded", score=1, max_score=10)]
    notes = exports.write_moodle_worksheet(reps, "lesson1", tmp_path / "m.csv", now=0)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "m.csv").read_text())))
    assert tuple(rows[0]) == exports.MOODLE_FIELDS
    assert [(r["Identifier"], r["Grade"], r["Maximum Grade"]) for r in rows] == [
        ("Participant 501", "7", "10"), ("Participant 502", "10", "10")]
    assert rows[1]["Status"].endswith("late") and rows[0]["Last modified (grade)"]
    assert notes == ["Moodle worksheet: ann is not a Moodle participant id (not written)"]
    ws = tmp_path / "ws.csv"
    ws.write_text(MOODLE_WORKSHEET)
    exports.write_moodle_worksheet(reps, "lesson1", tmp_path / "m2.csv", worksheet=ws, now=0)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "m2.csv").read_text())))
    assert [(r["Identifier"], r["Email address"], r["Grade"]) for r in rows] == [
        ("Participant 501", "ada@example.org", "7"), ("Participant 502", "alan@example.org", "10"),
        ("Participant 503", "grace@example.org", "")]
    assert "7 / 10 points" in rows[0]["Feedback comments"]
    # a student with nothing graded is told why, not sent to a feedback file about nothing
    gone = Report("503", "lesson1", "missing", max_score=10, lms_id="503",
                  detail="no notebook lesson1.ipynb in lesson1/")
    exports.write_moodle_worksheet([gone], "lesson1", tmp_path / "m3.csv", now=0)
    (row,) = csv.DictReader(io.StringIO((tmp_path / "m3.csv").read_text()))
    assert row["Feedback comments"] == ("lesson1: 0 / 10 points (missing): no notebook "
                                        "lesson1.ipynb in lesson1/")


def test_the_grade_command_refuses_a_hostile_zip_in_one_line(mini_course, tmp_path, capsys):
    from course_tools.grade import main as grade_main

    z = _hostile(tmp_path, "subs.zip", zipfile.ZipInfo("../../escaped.ipynb"), NB.encode())
    out = tmp_path / "out"
    assert grade_main([str(z), "--out", str(out), "--course", str(mini_course)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unsafe zip: entry '../../escaped.ipynb' climbs out")
    assert "\n" not in err
    assert not out.exists() and not list(tmp_path.parent.glob("escaped.ipynb"))
    assert not (tmp_path / "escaped.ipynb").exists()
    flat = tmp_path / "flat"
    _write(flat, {"lovelaceada_12345_67890_homework.ipynb": NB})
    # the mini course has one assignment: a flat download is for it
    assert grade_main([str(flat), "--out", str(out), "--course", str(mini_course),
                       "--layout", "canvas", "--canvas-gradebook", str(tmp_path / "no.csv")]) == 2
    assert "Canvas gradebook export" in capsys.readouterr().err


def test_a_plain_folder_names_students_after_its_files_even_with_spaces(tmp_path):
    src = _write(tmp_path / "dl", {"Bob Smith.ipynb": NB, "ada.ipynb": NB})
    st = lms.stage(src, tmp_path / "w", KNOWN, layout="plain", assignments=["lesson1"])
    by = {s.student: s for s in st.submissions}
    assert set(by) == {"Bob_Smith", "ada"}
    assert by["Bob_Smith"].name == "Bob Smith" and by["ada"].name == ""
    assert (st.root / "Bob_Smith" / "lesson1" / "lesson1.ipynb").is_file()


def test_a_canvas_column_is_found_by_its_name_whatever_the_case_and_spaces():
    from course_tools.exports import _canvas_column
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lesson 1 (98765)",
              "Current Score"]
    assert _canvas_column(header, "lesson1", None) == 5
    assert _canvas_column(header, "lesson2", None) is None


def test_a_canvas_column_named_after_the_lesson_and_its_title_is_found():
    """An instructor names the Canvas assignment "Lesson 3: The block" (the newcomer trial's export): that
    column is lesson3's; "Lesson 30" is not, and of two that could be, neither is guessed."""
    from course_tools.exports import _canvas_column
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lesson 30 (2001)",
              "Lesson 3: The block (2003)", "Capstone - size a real card (2009)", "Current Score"]
    assert _canvas_column(header, "lesson3", None) == 6
    assert _canvas_column(header, "capstone", None) == 7
    assert _canvas_column(header, "lesson30", None) == 5
    assert _canvas_column(header, "lesson1", None) is None
    assert _canvas_column([*header, "Lesson 3 quiz (2010)"], "lesson3", None) is None


def test_a_download_of_many_assignments_says_how_many_notebooks_it_did_not_name():
    """The refusal names five of the download's notebooks and counts the rest, rather than reading as if
    there were five (the newcomer trial's finding)."""
    from course_tools.lms import LMSError, _assignment

    names = [f"lesson{i}.ipynb" for i in range(1, 8)]
    with pytest.raises(LMSError, match=r"named lesson1, lesson2, lesson3, lesson4, lesson5 and 2 more; "):
        _assignment(None, names, ["lesson1", "lesson2", "lesson3"], "Canvas")
