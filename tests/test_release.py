"""The student release (notebooks/) is nbgrader's generate_assignment of solutions/, stored
clean, and holds no answer and no hidden test.

Each test runs for the throwaway course ``mini`` (built in conftest.py) and for every real
assignment in solutions/.
"""
from __future__ import annotations

import copy
import shutil
from pathlib import Path

import nbformat
import pytest

import course_tools
from course_tools.release import generate_release, main as release_main
from scans import _digest, _nbgrader, leaks

REPO = Path(__file__).resolve().parent.parent
@pytest.fixture
def fresh_release(assignment_case, tmp_path) -> Path:
    """A fresh ``generate_assignment`` of the case's source, in a tmp folder."""
    generate_release(assignment_case.course, [assignment_case.name], tmp_path)
    return tmp_path / assignment_case.name


def test_release_matches_a_fresh_generate_assignment(assignment_case, fresh_release):
    committed = assignment_case.course / "notebooks" / assignment_case.name
    assert committed.is_dir(), f"{committed} is missing: run `make release`"
    files = sorted(str(p.relative_to(fresh_release)) for p in fresh_release.rglob("*") if p.is_file())
    # JupyterLab's checkpoints (gitignored) are not part of the release.
    held = sorted(str(p.relative_to(committed)) for p in committed.rglob("*")
                  if p.is_file() and ".ipynb_checkpoints" not in p.parts)
    assert held == files, "notebooks/ and a fresh release hold different files: run `make release`"
    for name in files:
        if name.endswith(".ipynb"):
            new = nbformat.read(fresh_release / name, as_version=4)
            old = nbformat.read(committed / name, as_version=4)
            assert len(old.cells) == len(new.cells), f"{name}: cell count differs: run `make release`"
            for i, (a, b) in enumerate(zip(_digest(old), _digest(new))):
                assert a == b, f"{name} cell {i} differs from a fresh release: run `make release`"
        assert (committed / name).read_bytes() == (fresh_release / name).read_bytes(), (
            f"{name}: bytes differ from `make release` output (layout, outputs or metadata): "
            "run `make release`")


def test_release_has_no_outputs_or_execution_counts(assignment_case):
    for path in sorted((assignment_case.course / "notebooks" / assignment_case.name).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path.name} cell {i} has outputs"
                assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"


def test_solutions_are_stored_without_outputs(assignment_case):
    nb = nbformat.read(assignment_case.source_path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{assignment_case.source_path.name} cell {i} was saved with outputs")


def test_release_holds_no_solution_or_hidden_test(assignment_case):
    source = nbformat.read(assignment_case.source_path, as_version=4)
    release = nbformat.read(assignment_case.release_path, as_version=4)
    assert leaks(source, release) == []
    graded = [_nbgrader(c)["grade_id"] for c in release.cells if _nbgrader(c).get("grade")]
    assert graded, "the release has no graded cell"


def test_the_leak_check_catches_a_leak(mini_course):
    source = nbformat.read(mini_course / "solutions/mini/mini.ipynb", as_version=4)
    release = nbformat.read(mini_course / "notebooks/mini/mini.ipynb", as_version=4)
    assert leaks(source, release) == []
    for planted, expected in [("    return 2 * x", "solution line of q-double"),
                              ('assert math.isclose(square(0.5), 0.25), "square must work for fractions"',
                               "hidden test line of t-square"),
                              ("### BEGIN HIDDEN TESTS", "marker")]:
        bad = copy.deepcopy(release)
        bad.cells[2].source += "\n" + planted
        found = leaks(source, bad)
        assert any(expected in f for f in found), (planted, found)


def test_no_release_without_a_source():
    stale = [p.name for p in (REPO / "notebooks").iterdir()
             if p.is_dir() and p.name not in course_tools.assignments(REPO)]
    assert stale == [], f"notebooks/ holds assignments with no solutions/ source: {stale}"


def test_release_command_regenerates_and_is_idempotent(mini_course, tmp_path, capsys):
    course = tmp_path / "course"
    shutil.copytree(mini_course, course, ignore=shutil.ignore_patterns(".built"))
    source, release = course / "solutions/mini/mini.ipynb", course / "notebooks/mini/mini.ipynb"

    assert release_main(["--course", str(course), "mini"]) == 0
    assert capsys.readouterr().out.strip() == "mini: up to date"
    assert release.read_bytes() == (mini_course / "notebooks/mini/mini.ipynb").read_bytes()
    # nothing but the course's own files: no gradebook.db, no .nbgrader.log, no build dirs
    files = sorted(str(p.relative_to(course)) for p in course.rglob("*") if p.is_file())
    assert files == ["nbgrader_config.py", "notebooks/mini/mini.ipynb", "solutions/mini/mini.ipynb"]

    nb = nbformat.read(source, as_version=4)
    nb.cells[0].source += "\nEdited."
    nbformat.write(nb, source)
    (course / "notebooks/mini/stale.txt").write_text("left over")
    assert release_main(["--course", str(course)]) == 0
    out = capsys.readouterr().out
    assert "notebooks/mini/mini.ipynb" in out and "notebooks/mini/stale.txt" in out
    assert not (course / "notebooks/mini/stale.txt").exists()
    assert "Edited." in nbformat.read(release, as_version=4).cells[0].source
    files = sorted(str(p.relative_to(course)) for p in course.rglob("*") if p.is_file())
    assert files == ["nbgrader_config.py", "notebooks/mini/mini.ipynb", "solutions/mini/mini.ipynb"]

    assert release_main(["--course", str(course), "nope"]) == 1
    assert "unknown assignment(s) nope" in capsys.readouterr().err
