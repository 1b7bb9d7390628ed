"""The wrong-answer registry, and the submissions the grading tests build from a course.

``tests/wrong_answers/<assignment>.py`` defines ``WRONG``, a list of :class:`Wrong`: a
plausible mistake in one answer cell and the test cells it must cost.  See README.md.

Three kinds of submission are built from the student release (``notebooks/``) and the
source (``solutions/``):

* :func:`solution_submission`: the release with every answer cell replaced by the
  source's code, ``### BEGIN/END SOLUTION`` marker lines removed: must score full marks;
* the blank release itself: must score zero;
* :func:`wrong_submission`: the solution submission with some answer cells replaced by
  :class:`Wrong` entries' code: each entry's ``loses`` cells score 0, every other full;
* :func:`disarmed_submission`: a wrong submission whose learner also disarmed every course
  check in the kernel (:data:`DISARM_CHECKS`): it must score exactly as the wrong one does.

:func:`batches` packs entries into as few submissions as it can (each autograde run costs
seconds).
"""
from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass

import nbformat

SOLUTION_BEGIN, SOLUTION_END = "BEGIN SOLUTION", "END SOLUTION"


@dataclass(frozen=True)
class Wrong:
    """A plausible wrong answer to one graded exercise.

    Attributes:
        cell: ``grade_id`` of the answer (solution) cell it replaces, e.g. ``"q-gpt2-params"``.
        source: the whole code of that cell as a learner who made this mistake would write it
            (a complete cell, not a diff; no nbgrader markers).
        loses: ``grade_id`` of every test cell that must score 0 with this answer, e.g.
            ``("t-gpt2-params",)``; all other test cells must keep full marks.  Include later
            test cells that use this answer, and leave out any the mistake happens to pass.
        why: the mistake in a few words ("tied head counted twice"), for people reading
            test failures.
        alone: grade it in a submission of its own (default False: it may share a
            submission with entries for other cells whose ``loses`` do not overlap).
    """
    cell: str
    source: str
    loses: tuple[str, ...] | list[str]
    why: str
    alone: bool = False

    def __post_init__(self):
        object.__setattr__(self, "loses", tuple(self.loses))


def load(assignment: str) -> list[Wrong]:
    """``WRONG`` from ``tests/wrong_answers/<assignment>.py`` (an empty list if there is no
    such module; the coverage test then fails for that assignment)."""
    try:
        module = importlib.import_module(f"{__name__}.{assignment}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{assignment}":
            return []
        raise
    wrong = getattr(module, "WRONG", None)
    if not isinstance(wrong, (list, tuple)) or not all(isinstance(w, Wrong) for w in wrong):
        raise TypeError(f"{module.__file__}: WRONG must be a list of wrong_answers.Wrong")
    return list(wrong)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def solution_cells(nb) -> dict[str, str]:
    """``{grade_id: source}`` of the answer cells (``solution: true``) of a notebook."""
    return {_meta(c)["grade_id"]: c.source for c in nb.cells if _meta(c).get("solution")}


def graded_cells(nb) -> dict[str, float]:
    """``{grade_id: points}`` of the autograded test cells (``grade: true``, not a solution)."""
    return {_meta(c)["grade_id"]: float(_meta(c).get("points", 0)) for c in nb.cells
            if _meta(c).get("grade") and not _meta(c).get("solution")}


def strip_solution_markers(source: str) -> str:
    """The source with its ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines removed."""
    return "\n".join(ln for ln in source.splitlines()
                     if SOLUTION_BEGIN not in ln and SOLUTION_END not in ln)


def solution_submission(release_nb, source_nb):
    """A copy of the release with each answer cell's code replaced by the source's, markers
    stripped (what a learner who wrote the model answer would submit)."""
    answers = solution_cells(source_nb)
    nb = copy.deepcopy(release_nb)
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if _meta(cell).get("solution"):
            if gid not in answers:
                raise ValueError(f"release answer cell {gid!r} is not in the source notebook")
            cell.source = strip_solution_markers(answers[gid])
    return nb


def wrong_submission(solution_nb, wrongs: list[Wrong]):
    """A copy of ``solution_nb`` with each entry's answer cell replaced by its source."""
    by_cell = {w.cell: w for w in wrongs}
    if len(by_cell) != len(wrongs):
        raise ValueError("one submission can hold only one wrong answer per cell")
    nb = copy.deepcopy(solution_nb)
    seen = set()
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if _meta(cell).get("solution") and gid in by_cell:
            cell.source = by_cell[gid].source
            seen.add(gid)
    if seen != set(by_cell):
        raise ValueError(f"no answer cell for {sorted(set(by_cell) - seen)}")
    return nb


DISARM_CHECKS = """\
# Hostile: make every course check pass in the kernel, whatever the answers.
import functools as _functools, importlib as _importlib

def _swallow(check):
    @_functools.wraps(check)
    def swallowed(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except Exception:
            return None
    return swallowed

for _name in ("", ".lesson1", ".lesson2", ".lesson3", ".lesson4", ".lesson5", ".lesson6",
              ".capstone"):
    _module = _importlib.import_module("course_lib.checks" + _name)
    for _key, _value in list(vars(_module).items()):
        if _key.startswith("check_") and callable(_value):
            setattr(_module, _key, _swallow(_value))
"""
"""Code that replaces every ``check_*`` function of course_lib.checks and its lesson modules
with one that swallows any failure, so no test cell raises in the kernel: whatever a graded
cell earns then, the grader decided outside the kernel (from the check records)."""


def disarmed_submission(nb):
    """A copy of submission ``nb`` with :data:`DISARM_CHECKS` run first in its first answer
    cell: a hostile learner who answered as ``nb`` does.  It must score exactly what ``nb``
    scores."""
    nb = copy.deepcopy(nb)
    first = next(c for c in nb.cells if _meta(c).get("solution") and c.cell_type == "code")
    first.source = DISARM_CHECKS + "\n" + first.source
    return nb


def batches(wrongs: list[Wrong], each_alone: bool = False) -> list[list[Wrong]]:
    """Pack entries into as few submissions as possible, first fit in registry order: a
    submission holds at most one entry per answer cell, and an ``alone`` entry (every entry,
    with ``each_alone``) has a submission to itself.

    So an assignment costs as many autograde runs as its most-answered cell has entries.  In
    a shared submission a test cell listed by two entries scores 0 because of either: run
    with ``each_alone`` (``WRONG_ANSWERS_ALONE=1``) to check every claim on its own."""
    packed: list[list[Wrong]] = []
    for w in wrongs:
        for group in packed:
            if w.alone or each_alone or any(g.alone for g in group):
                continue
            if all(g.cell != w.cell for g in group):
                group.append(w)
                break
        else:
            packed.append([w])
    return packed


def problems(wrongs: list[Wrong], source_nb) -> list[str]:
    """What is wrong with a registry, checked against the assignment's source notebook."""
    answers, tests = solution_cells(source_nb), graded_cells(source_nb)
    out = []
    for i, w in enumerate(wrongs):
        where = f"WRONG[{i}] ({w.cell}: {w.why!r})"
        if w.cell not in answers:
            out.append(f"{where}: cell {w.cell!r} is not an answer cell; answer cells: "
                       f"{', '.join(sorted(answers))}")
        elif strip_solution_markers(answers[w.cell]).strip() == w.source.strip():
            out.append(f"{where}: source is the model answer itself")
        if not w.loses:
            out.append(f"{where}: loses is empty (a wrong answer must cost a test cell)")
        bad = [t for t in w.loses if t not in tests]
        if bad:
            out.append(f"{where}: loses {bad} are not graded test cells; test cells: "
                       f"{', '.join(sorted(tests))}")
        if len(set(w.loses)) != len(w.loses):
            out.append(f"{where}: loses lists a cell twice")
        if not w.why.strip():
            out.append(f"{where}: why is empty")
        if "BEGIN SOLUTION" in w.source or "HIDDEN TESTS" in w.source:
            out.append(f"{where}: source holds nbgrader markers")
    return out


def read(path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)
