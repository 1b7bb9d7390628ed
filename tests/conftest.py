"""Shared fixtures.  Others may add fixtures here: keep each one documented.

Course fixtures (for tests/test_release.py and tests/test_grading.py):

* ``assignment_case``: parametrizes a test over a throwaway one-assignment course ``mini``
  (built here, so the tools are tested even before any real assignment exists) and every
  real assignment in ``solutions/``.
* ``graded``: the case graded once through ``course_tools.grade`` (solution, blank and
  wrong-answer submissions; for a real assignment also :data:`DISARMED`; for ``mini`` also
  one that runs past its budget, one past its memory limit, one that kills its kernel and the nearly-blank ones of :data:`MINI_NEARLY_BLANK`; for
  :data:`CLASS_ASSIGNMENT` also the broken and hostile class of tests/grading_class.py);
  shared by all tests and, under pytest-xdist, by all workers (a file lock makes the first
  one build it).
* ``class_graded``: ``graded`` for :data:`CLASS_ASSIGNMENT` (skips if it does not exist).
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from filelock import FileLock

import course_tools
import grading_class
import wrong_answers
from wrong_answers import Wrong

REPO = Path(__file__).resolve().parent.parent
REAL_ASSIGNMENTS = course_tools.assignments(REPO)

LMS_SAMPLES = REPO / "tests" / "data" / "lms"
CANVAS_EXPORT = (LMS_SAMPLES / "canvas_gradebook_export.csv").read_text()
"""A Canvas gradebook export (Grades > Export), in Canvas's documented layout."""
MOODLE_WORKSHEET = (LMS_SAMPLES / "moodle_grading_worksheet.csv").read_text()
"""A Moodle assignment's offline grading worksheet, in Moodle's documented layout."""


@contextlib.contextmanager
def torch_on_one_thread():
    """torch on one thread inside the block: the course's tensors are tiny, and on a shared
    2-core machine one thread beats several spin-waiting."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def one_thread():
    """:func:`torch_on_one_thread` while a test runs.  A module opts in with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    with torch_on_one_thread():
        yield


# --------------------------------------------------------------------------------------
# A throwaway course: one assignment, three graded test cells, visible and hidden tests.

def _cell(kind: str, source: str, **nbgrader) -> nbformat.NotebookNode:
    new = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = new(source)
    if nbgrader:
        meta = {"schema_version": 3, "grade": False, "solution": False, "locked": False,
                "task": False}
        meta.update(nbgrader)
        cell.metadata["nbgrader"] = meta
    return cell


def mini_notebook() -> nbformat.NotebookNode:
    """Source notebook of the throwaway assignment ``mini`` (answers and hidden tests)."""
    cells = [
        _cell("markdown", "# Mini\nA throwaway assignment for testing the course tools.",
              grade_id="intro", locked=True),
        _cell("code", "import math", grade_id="setup", locked=True),
        _cell("code", 'def double(x):\n    """Twice x."""\n    ### BEGIN SOLUTION\n'
                      "    return 2 * x\n    ### END SOLUTION", grade_id="q-double",
              solution=True),
        _cell("code", 'assert double(3) == 6, "double(3) should be 6: multiply by two"\n'
                      "### BEGIN HIDDEN TESTS\n"
                      'assert double(-21) == -42, "double must keep the sign of a negative x"\n'
                      "### END HIDDEN TESTS", grade_id="t-double", grade=True, locked=True,
              points=2),
        _cell("code", "def square(x):\n    ### BEGIN SOLUTION\n    squared = x * x\n"
                      "    return squared\n    ### END SOLUTION", grade_id="q-square",
              solution=True),
        _cell("code", 'assert square(3) == 9, "square(3) should be 9"\n'
                      "### BEGIN HIDDEN TESTS\n"
                      'assert math.isclose(square(0.5), 0.25), "square must work for fractions"\n'
                      "### END HIDDEN TESTS", grade_id="t-square", grade=True, locked=True,
              points=3),
        _cell("code", 'assert double(square(2)) == 8, "double(square(2)) should be 8"',
              grade_id="t-both", grade=True, locked=True, points=1),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


MINI_WRONG = [
    Wrong(cell="q-double", source="def double(x):\n    return x + 2",
          loses=["t-double", "t-both"], why="adds two instead of doubling"),
    Wrong(cell="q-double", source="def double(x):\n    return abs(2 * x)",
          loses=["t-double"], why="drops the sign: passes the visible test, not the hidden one"),
    # square(2) == 2 * 2, so t-both still passes: `loses` lists only what really fails.
    Wrong(cell="q-square", source="def square(x):\n    return 2 * x",
          loses=["t-square"], why="doubles instead of squaring"),
]

MINI_NEARLY_BLANK = {
    # answer cells as released, the answer in a cell of its own: t-double passes (2 points)
    "answered-elsewhere": ({}, "def double(x):\n    return 2 * x", "graded", 2),
    # likewise but wrong: no test passes, so blank (its detail counts the added cell)
    "elsewhere-wrong": ({}, "def double(x):\n    return x + 2", "blank", 0),
    # q-double as released, q-square answered (wrongly): 0 points, but not blank
    "partly-blank": ({"q-square": "def square(x):\n    return 2 * x"}, None, "graded", 0),
}
"""Mini students built from the blank release: ``{student: ({answer grade_id: source},
code of a cell added after q-double or None, expected status, expected score)}``."""

MINI_SETTINGS = dict(jobs=1, cell_timeout=60, notebook_timeout=20, memory_limit_gib=4)
"""How the mini class is graded: a cell may take longer than the notebook's budget, so the
student ``over-budget`` (an answer cell that sleeps) is stopped by the budget; the student
``memory-hog`` asks for more than the memory limit (:data:`MEMORY_HOG`)."""

MEMORY_HOG = "import numpy as np\n_big = np.empty(6 * 2**30, dtype=np.uint8)  # 6 GiB\n"
"""Code put before the mini student ``memory-hog``'s q-square: past the 4 GiB limit it raises
MemoryError (without a limit ``np.empty`` would succeed, touching no page)."""

DISARMED = "disarmed-1"
"""Student of every real assignment: wrong-1's answers, every course check disarmed in the
kernel (tests/wrong_answers, ``disarmed_submission``); must score exactly as wrong-1."""

CLASS_ASSIGNMENT = "lesson1"
"""The real assignment graded with the broken and hostile class of tests/grading_class.py."""
CLASS_SETTINGS = dict(jobs=2, cell_timeout=10, notebook_timeout=150)
"""Short cell timeout for the class (its loops cost 10 s, not 60), two jobs."""
REAL_SETTINGS = dict(jobs=2)
"""Other real assignments: the course's own timeouts, two jobs."""


def build_mini_course(root: Path) -> None:
    """Write a course root with the repository's nbgrader_config.py and assignment ``mini``,
    and release it with course_tools (as ``make release`` would)."""
    from course_tools.release import generate_release

    shutil.copyfile(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    (root / "solutions" / "mini").mkdir(parents=True)
    nbformat.write(mini_notebook(), root / "solutions" / "mini" / "mini.ipynb")
    generate_release(root, ["mini"], root / "notebooks")


# --------------------------------------------------------------------------------------
# Build things once per test run, across pytest-xdist workers.

def _shared_root(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(tmp_path_factory, name: str, build) -> Path:
    """``build(path)`` into a folder shared by every xdist worker of this run, once."""
    path = _shared_root(tmp_path_factory) / name
    with FileLock(str(path) + ".lock"):
        if not (path / ".built").exists():
            if path.exists():
                course_tools.remove_tree(path)
            path.mkdir(parents=True)
            build(path)
            (path / ".built").touch()
    return path


def tree_digest(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root``."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(root).rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def mini_course(tmp_path_factory) -> Path:
    """A course root with the throwaway assignment ``mini`` (source and release)."""
    return build_once(tmp_path_factory, "mini-course", build_mini_course)


# --------------------------------------------------------------------------------------
# Parametrization over the mini assignment and every real one.

@dataclass(frozen=True)
class Case:
    """One assignment of one course root, with its wrong-answer registry."""
    name: str
    course: Path
    wrongs: tuple[Wrong, ...]
    mini: bool

    @property
    def source_path(self) -> Path:
        return self.course / "solutions" / self.name / f"{self.name}.ipynb"

    @property
    def release_path(self) -> Path:
        return self.course / "notebooks" / self.name / f"{self.name}.ipynb"


def pytest_configure(config):
    config.addinivalue_line("markers", "real_assignments: parametrize assignment_case over the "
                            "course's assignments only, not the throwaway mini")


def pytest_generate_tests(metafunc):
    if "assignment_case" in metafunc.fixturenames:
        real_only = metafunc.definition.get_closest_marker("real_assignments") is not None
        names = ([] if real_only else ["mini"]) + REAL_ASSIGNMENTS
        metafunc.parametrize("assignment_case", names, ids=names, indirect=True)


@pytest.fixture
def assignment_case(request, tmp_path_factory) -> Case:
    if request.param == "mini":
        return Case("mini", build_once(tmp_path_factory, "mini-course", build_mini_course),
                    tuple(MINI_WRONG), True)
    return Case(request.param, REPO, tuple(wrong_answers.load(request.param)), False)


# --------------------------------------------------------------------------------------
# One grading run per assignment.

@dataclass
class Graded:
    """Everything a grading test reads: the submissions and what course_tools.grade made."""
    case: Case
    root: Path
    batches: list[list[Wrong]]

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def submissions(self) -> Path:
        return self.root / "submissions"

    @property
    def results(self) -> dict[str, dict]:
        """``{student: row of results.json}`` for this assignment."""
        rows = json.loads((self.out / "results.json").read_text())
        return {r["student"]: r for r in rows if r["assignment"] == self.case.name}

    def cell_scores(self, student: str) -> dict[str, tuple[float, float]]:
        """``{grade_id: (score, max_score)}`` read from nbgrader's gradebook itself."""
        with course_tools.open_gradebook(f"sqlite:///{self.out / 'course' / 'gradebook.db'}") as gb:
            sub = gb.find_submission(self.case.name, student)
            return {g.name: (float(g.score), float(g.max_score))
                    for nb in sub.notebooks for g in nb.grades}

    @property
    def digests(self) -> dict[str, dict[str, str]]:
        return json.loads((self.root / "digests.json").read_text())

    @property
    def report(self) -> str:
        """What the grade command printed."""
        return (self.root / "report.txt").read_text()

    @property
    def reference(self) -> dict[str, list[dict]]:
        """``{"notebook/grade_id": check records}`` of the model answer's run."""
        return json.loads((self.out / "reference.json").read_text())[self.case.name]

    @property
    def kinds(self) -> list:
        """The class's :class:`grading_class.Kind` list (empty unless the class assignment)."""
        return [k for k, _ in grading_class.build(*self._release_and_source(),
                                                  list(self.case.wrongs))] \
            if self.case.name == CLASS_ASSIGNMENT and not self.case.mini else []

    def _release_and_source(self):
        name = self.case.name
        return (wrong_answers.read(self.root / "release" / name / f"{name}.ipynb"),
                wrong_answers.read(self.case.source_path))


def _write(nb, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def build_graded(case: Case, root: Path) -> None:
    """Write the class's submissions for ``case`` and grade them with course_tools.grade."""
    from course_tools.grade import grade
    from course_tools.release import generate_release

    name = case.name
    generate_release(case.course, [name], root / "release")  # what students were given
    release = wrong_answers.read(root / "release" / name / f"{name}.ipynb")
    source = wrong_answers.read(case.source_path)
    solution = wrong_answers.solution_submission(release, source)
    subs = root / "submissions"
    _write(solution, subs / "solution" / name / f"{name}.ipynb")
    _write(release, subs / "blank" / name / f"{name}.ipynb")
    for i, batch in enumerate(_batches(case), 1):
        _write(wrong_answers.wrong_submission(solution, batch),
               subs / f"wrong-{i}" / name / f"{name}.ipynb")
    if not case.mini and case.wrongs:  # wrong-1 with every check disarmed in the kernel
        _write(wrong_answers.disarmed_submission(
            wrong_answers.wrong_submission(solution, _batches(case)[0])),
            subs / DISARMED / name / f"{name}.ipynb")
    if case.mini:
        slow = copy.deepcopy(solution)  # sleeps in q-square: t-double (2 points) still counts
        next(c for c in slow.cells if wrong_answers._meta(c).get("grade_id") == "q-square"
             ).source = "import time\ntime.sleep(3600)"
        _write(slow, subs / "over-budget" / name / f"{name}.ipynb")
        hog = copy.deepcopy(solution)  # asks for more memory than a kernel may have
        cell = next(c for c in hog.cells if wrong_answers._meta(c).get("grade_id") == "q-square")
        cell.source = MEMORY_HOG + cell.source
        _write(hog, subs / "memory-hog" / name / f"{name}.ipynb")
        crash = copy.deepcopy(solution)  # kills its kernel in q-double: t-square still counts
        cell = next(c for c in crash.cells if wrong_answers._meta(c).get("grade_id") == "q-double")
        cell.source = "import os\nos._exit(1)\n" + cell.source
        _write(crash, subs / "kernel-killer" / name / f"{name}.ipynb")
        for student, (answers, added, _, _) in MINI_NEARLY_BLANK.items():
            nb = copy.deepcopy(release)
            for cell in nb.cells:
                gid = wrong_answers._meta(cell).get("grade_id")
                cell.source = answers.get(gid, cell.source)
            if added is not None:
                at = next(i for i, c in enumerate(nb.cells)
                          if wrong_answers._meta(c).get("grade_id") == "q-double")
                nb.cells.insert(at + 1, nbformat.v4.new_code_cell(added))
            _write(nb, subs / student / name / f"{name}.ipynb")
        settings = MINI_SETTINGS
    elif name == CLASS_ASSIGNMENT:
        grading_class.write(grading_class.build(release, source, list(case.wrongs)), subs, name)
        settings = CLASS_SETTINGS
    else:
        settings = REAL_SETTINGS

    before = {"submissions": tree_digest(subs), "course": tree_digest(case.course)
              if case.mini else {}}
    lines: list[str] = []
    grade(subs, root / "out", [name], case.course,
          echo=lambda *a: lines.append(" ".join(map(str, a))), **settings)
    after = {"submissions": tree_digest(subs), "course": tree_digest(case.course)
             if case.mini else {}}
    (root / "report.txt").write_text("\n".join(lines) + "\n")
    (root / "digests.json").write_text(json.dumps({"before": before, "after": after}))


EACH_WRONG_ALONE = os.environ.get("WRONG_ANSWERS_ALONE", "") not in ("", "0")
"""``WRONG_ANSWERS_ALONE=1``: grade every wrong answer in a submission of its own (slower;
checks each entry's ``loses`` exactly, for authors writing a registry)."""


def _batches(case: Case) -> list[list[Wrong]]:
    return wrong_answers.batches(list(case.wrongs), each_alone=EACH_WRONG_ALONE)


def _graded(case: Case, tmp_path_factory) -> Graded:
    key = f"graded-{'mini' if case.mini else 'repo'}-{case.name}{'-alone' * EACH_WRONG_ALONE}"
    root = build_once(tmp_path_factory, key, lambda p: build_graded(case, p))
    return Graded(case, root, _batches(case))


@pytest.fixture
def graded(assignment_case, tmp_path_factory) -> Graded:
    """``assignment_case`` graded once per run (see :func:`build_graded`)."""
    return _graded(assignment_case, tmp_path_factory)


@pytest.fixture
def mini_graded(mini_course, tmp_path_factory) -> Graded:
    """The mini class graded (the same run as ``graded`` for the ``mini`` case), with its
    over-budget student."""
    return _graded(Case("mini", mini_course, tuple(MINI_WRONG), True), tmp_path_factory)


@pytest.fixture
def class_graded(tmp_path_factory) -> Graded:
    """:data:`CLASS_ASSIGNMENT` graded with the class of tests/grading_class.py (the same run
    as ``graded`` for that assignment)."""
    if CLASS_ASSIGNMENT not in REAL_ASSIGNMENTS:
        pytest.skip(f"no assignment {CLASS_ASSIGNMENT} in solutions/")
    case = Case(CLASS_ASSIGNMENT, REPO, tuple(wrong_answers.load(CLASS_ASSIGNMENT)), False)
    return _graded(case, tmp_path_factory)
