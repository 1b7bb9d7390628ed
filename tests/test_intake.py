"""The grade command's intake (course_tools.intake), no kernel: what it reads of a submission,
what it repairs and notes, what it refuses to follow, on the throwaway course ``mini``."""
from __future__ import annotations

import copy
import json

import nbformat
import pytest

import wrong_answers
from course_tools.intake import INVALID_JSON, INVALID_NOTEBOOK, MISNAMED, USABLE, \
    inspect_submission, normalize


@pytest.fixture
def mini(mini_course):
    release = wrong_answers.read(mini_course / "notebooks" / "mini" / "mini.ipynb")
    source = wrong_answers.read(mini_course / "solutions" / "mini" / "mini.ipynb")
    return release, wrong_answers.solution_submission(release, source)


def _ids(nb):
    return [wrong_answers._meta(c).get("grade_id") for c in nb.cells]


def test_a_clean_submission_needs_no_repair(mini):
    release, solution = mini
    nb = copy.deepcopy(solution)
    assert normalize(nb, release) == []
    assert _ids(nb) == _ids(solution)


def test_pasted_cells_keep_the_copy_in_place(mini):
    release, solution = mini
    nb = copy.deepcopy(solution)
    t = next(c for c in nb.cells if wrong_answers._meta(c).get("grade_id") == "t-double")
    nb.cells.insert(0, copy.deepcopy(t))          # pasted above everything, same id
    nb.cells.append(copy.deepcopy(t))             # and at the end
    notes = normalize(nb, release)
    assert notes == ["test cell t-double appeared 3 times: the copy at position 5 was graded, "
                     "the others ran as ordinary cells"]
    assert _ids(nb).count("t-double") == 1 and _ids(nb).index("t-double") == 4
    assert len({c.id for c in nb.cells}) == len(nb.cells)  # ids made unique
    nbformat.validate(nb)


def test_deleted_changed_and_unknown_cells(mini):
    release, solution = mini
    nb = copy.deepcopy(solution)
    nb.cells = [c for c in nb.cells if wrong_answers._meta(c).get("grade_id")
                not in ("q-square", "t-square")]
    t = next(c for c in nb.cells if wrong_answers._meta(c).get("grade_id") == "t-both")
    t.metadata["nbgrader"]["points"] = 50
    t.source = "pass"
    nb.cells[0].metadata["nbgrader"] = {"grade": True, "grade_id": "t-bonus", "points": 9,
                                        "solution": False, "locked": True, "schema_version": 3}
    notes = normalize(nb, release)
    assert "cell 1 claimed to be graded cell 't-bonus'" in notes[0]
    assert "the nbgrader settings of cell t-both were changed: restored" in notes
    assert "test cell t-both was edited: restored from the gradebook before grading" in notes
    assert "answer cell q-square was missing: it was put back blank" in notes
    assert "test cell t-square was missing: it was put back and run" in notes
    assert [g for g in _ids(nb) if g] == [g for g in _ids(release) if g]  # release order
    assert wrong_answers._meta(nb.cells[-1])["points"] == 1


def test_settings_jupyterlabs_panel_rewrites_are_repaired_without_a_note(mini):
    """JupyterLab's Create Assignment panel, merely opened, drops nbgrader's ``cell_type`` from
    every graded cell (and may write points as a float, ``locked: false`` where it was absent):
    nothing a grade depends on, so the cell is repaired and graded with no note."""
    release, solution = mini
    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        if meta:
            meta.pop("cell_type", None)
            meta.pop("checksum", None)
            meta.setdefault("locked", False)
            if "points" in meta:
                meta["points"] = float(meta["points"])
    assert normalize(nb, release) == []
    for mine, theirs in zip(nb.cells, release.cells):
        assert wrong_answers._meta(mine) == wrong_answers._meta(theirs)  # restored as released


def test_a_meaningful_settings_change_is_still_noted(mini):
    release, solution = mini
    for key, value in [("points", 50), ("grade", False), ("locked", False), ("task", True)]:
        nb = copy.deepcopy(solution)
        t = next(c for c in nb.cells if wrong_answers._meta(c).get("grade_id") == "t-both")
        t.metadata["nbgrader"].pop("cell_type", None)
        t.metadata["nbgrader"][key] = value
        assert "the nbgrader settings of cell t-both were changed: restored" in normalize(nb, release), key


def test_inspect_reports_what_it_found(mini, tmp_path):
    release, solution = mini
    d = tmp_path / "ann" / "mini"
    d.mkdir(parents=True)
    text = json.dumps(solution)
    (d / "mini.ipynb").write_text(text[:100])
    assert inspect_submission(tmp_path / "ann", "mini", {"mini": release}).status == INVALID_JSON
    (d / "mini.ipynb").write_text('{"cells": 3}')
    assert inspect_submission(tmp_path / "ann", "mini", {"mini": release}).status == INVALID_NOTEBOOK
    (d / "mini.ipynb").unlink()
    (d / "copy of mini.ipynb").write_text(text)  # the only notebook: graded, noted
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == USABLE and "graded copy of mini.ipynb" in i.notes[0]
    (d / "mini (1).ipynb").write_text(text)  # two candidates: which one?
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == MISNAMED and "copy of mini.ipynb" in i.detail
    (d / "mini (1).ipynb").unlink()
    (d / "copy of mini.ipynb").rename(d / "mini.ipynb")
    old = json.loads(text)  # an nbformat 4.4 notebook: no cell ids
    old["nbformat_minor"] = 4
    for c in old["cells"]:
        c.pop("id", None)
    (d / "mini.ipynb").write_text(json.dumps(old))
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == USABLE and i.notes == []
    nbformat.validate(i.notebooks["mini"])


def test_links_devices_and_huge_files_are_not_followed(mini, tmp_path, monkeypatch):
    import os

    from course_tools import intake
    from course_tools.intake import copy_extra_files

    release, solution = mini
    d = tmp_path / "ann" / "mini"
    d.mkdir(parents=True)
    (tmp_path / "elsewhere.ipynb").write_text(json.dumps(solution))
    os.symlink(tmp_path / "elsewhere.ipynb", d / "mini.ipynb")
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == INVALID_NOTEBOOK and "symbolic link" in i.detail
    (d / "mini.ipynb").unlink()
    (d / "mini.ipynb").write_text(json.dumps(solution))
    monkeypatch.setattr(intake, "MAX_NOTEBOOK_BYTES", 1000)
    i = inspect_submission(tmp_path / "ann", "mini", {"mini": release})
    assert i.status == INVALID_NOTEBOOK and "clear its outputs" in i.detail
    # other files: regular ones are copied, a link to a device is not read
    (d / "data.csv").write_text("1,2\n")
    os.symlink("/dev/zero", d / "endless.bin")
    (d / "big.bin").write_bytes(b"x" * 2000)
    left = copy_extra_files(d, tmp_path / "copy", limit=1000)
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["data.csv"]
    assert left == ["big.bin (too large)", "endless.bin (not a regular file)"]


def test_another_assignments_notebook_in_its_place_is_misnamed_not_blank(tmp_path):
    """Lesson 4's notebook uploaded as lesson 5 (under lesson 4's name or lesson 5's) is not graded as a blank
    lesson 5 with a note per foreign graded cell (the newcomer trial's finding): it is misnamed, in one line
    naming the notebook it is and the one to submit.  Lesson 5's own release is read as usual."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    releases = {a: nbformat.read(root / "notebooks" / a / f"{a}.ipynb", as_version=4) for a in ("lesson4", "lesson5")}
    d = tmp_path / "zed" / "lesson5"
    d.mkdir(parents=True)
    for name in ("lesson4.ipynb", "lesson5.ipynb"):
        (d / name).write_text(nbformat.writes(releases["lesson4"]))
        i = inspect_submission(tmp_path / "zed", "lesson5", {"lesson5": releases["lesson5"]})
        assert i.status == MISNAMED and f"{name} is another assignment's notebook ('Lesson 4" in i.detail, i.detail
        assert "is lesson5's; submit lesson5/lesson5.ipynb" in i.detail and "\n" not in i.detail
        (d / name).unlink()
    (d / "lesson5.ipynb").write_text(nbformat.writes(releases["lesson5"]))
    assert inspect_submission(tmp_path / "zed", "lesson5", {"lesson5": releases["lesson5"]}).status == USABLE
