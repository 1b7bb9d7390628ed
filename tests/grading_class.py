"""A class of submissions built from an assignment's own notebooks: good, broken and hostile,
graded together by tests/test_grading.py (fixture ``class_graded`` in conftest.py).

Every kind the grade command must survive is here, each as one student, with what the grader
must make of it (:class:`Kind`).  The submissions are made from the student release, the
model answer (:func:`wrong_answers.solution_submission`) and ``partly-wrong``: the model answer
with a plausible mistake (from ``tests/wrong_answers/<assignment>.py``) in every other answer
cell, so that some test cells pass and some fail.  A hostile submission is partly-wrong plus a
trick, so its fair score is known from the registry's claims, cell by cell: the cells the
mistakes lose score 0, the others full marks; or, if the trick stops the checks from reporting
at all, every cell whose checks report scores 0.

One assumption about the assignment: every test cell after its last answer cell uses that
answer (true of lesson 1: ``t-tys3`` after ``q-tys3``).  Submissions that break the last
answer cell lose exactly those cells.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field

import nbformat

import wrong_answers
from course_tools.scoring import check_calls

_meta = wrong_answers._meta


@dataclass
class Kind:
    """One student of the class and what grading must make of it.

    Attributes:
        student: folder name.
        status: expected status.
        expect: ``"full"``, ``"partly"`` (the cells the partly-wrong mistakes lose score 0,
            the others full), ``"no-records"`` (every cell whose checks report scores 0,
            none above "partly"),
            ``"lose-last"`` (full marks but the tests after the last answer cell), or
            ``"none"`` (not graded: 0).
        detail: phrases the detail (CSV and report) must contain.
        why: what the submission does, for failure messages.
    """
    student: str
    status: str
    expect: str
    why: str
    detail: tuple[str, ...] = ()
    files: dict = field(default_factory=dict, repr=False)
    """``{relative path: bytes}`` to write under the student's folder."""


LAB_PANEL = "lab-panel-opened"
"""The student whose lab rewrote every graded cell's settings without meaning (#13)."""


def _answers(nb) -> list[str]:
    return [_meta(c)["grade_id"] for c in nb.cells if _meta(c).get("solution")]


def _tests(nb) -> list[str]:
    return list(wrong_answers.graded_cells(nb))


def _cell(nb, gid):
    return next(c for c in nb.cells if _meta(c).get("grade_id") == gid)


def tests_after_last_answer(nb) -> list[str]:
    last = max(i for i, c in enumerate(nb.cells) if _meta(c).get("solution"))
    return [_meta(c)["grade_id"] for c in nb.cells[last + 1:]
            if _meta(c).get("grade") and not _meta(c).get("solution")]


def _prepend(nb, gid, code: str):
    out = copy.deepcopy(nb)
    cell = _cell(out, gid)
    cell.source = code.rstrip("\n") + "\n" + cell.source
    return out


NOISE = '''
import functools as _ft, sys as _sys, types as _types, warnings as _warnings
print("my notes on this answer")
print("a message on stderr", file=_sys.stderr)
_warnings.warn("a harmless warning at the top level")
def _noisy(f):
    @_ft.wraps(f)
    def g(*args, **kwargs):
        print("calling", f.__name__)
        print("stderr from", f.__name__, file=_sys.stderr)
        _warnings.warn(f"{f.__name__} is called (a harmless warning)")
        return f(*args, **kwargs)
    g._noisy = True
    return g
for _n, _v in list(globals().items()):
    if (isinstance(_v, _types.FunctionType) and _v.__module__ == "__main__"
            and not _n.startswith("_") and not getattr(_v, "_noisy", False)):
        globals()[_n] = _noisy(_v)
'''

PATCH_COMPARISONS = '''
import math, numpy as np
math.isclose = lambda *a, **k: True
np.isclose = lambda *a, **k: np.True_
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
try:
    import torch
    torch.allclose = lambda *a, **k: True
    torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
except ImportError:
    pass
'''

SWALLOW_CHECKS = '''
import sys as _sys
def _swallow(f):
    def g(*args, **kwargs):
        try:
            f(*args, **kwargs)
        except BaseException:
            pass
    return g
for _name, _mod in list(_sys.modules.items()):
    if _name == "course_lib.checks" or _name.startswith("course_lib.checks."):
        for _n in dir(_mod):
            if _n.startswith("check_") and callable(getattr(_mod, _n)):
                setattr(_mod, _n, _swallow(getattr(_mod, _n)))
'''

HIJACK = '''
import sys as _sys
def _skip_tests(lines):
    text = "".join(lines)
    return ["pass\\n"] if ("check_" in text or "assert " in text) else lines
get_ipython().input_transformers_post.append(_skip_tests)
for _name, _mod in list(_sys.modules.items()):
    if _name == "course_lib.checks" or _name.startswith("course_lib.checks."):
        for _n in ("check_value", "check_choice", "check_sealed", "check_close"):
            if hasattr(_mod, _n):
                setattr(_mod, _n, lambda *a, **k: None)
'''


def build(release, source, wrongs) -> list[tuple[Kind, object]]:
    """``[(Kind, notebook or None)]`` for the class (``None``: the Kind's ``files`` say what
    to write)."""
    solution = wrong_answers.solution_submission(release, source)
    answers, tests = _answers(release), _tests(release)
    first_q, last_q = answers[0], answers[-1]
    partly = wrong_answers.wrong_submission(solution, partly_wrong(wrongs, release))
    out: list[tuple[Kind, object]] = [
        (Kind("partly-wrong", "graded", "partly", "a plausible mistake in every other answer "
              "cell"), partly)]

    noisy = copy.deepcopy(solution)
    for gid in answers:
        _cell(noisy, gid).source += "\n" + NOISE
    out.append((Kind("noisy", "graded", "full", "prints, warns and writes to stderr, also "
                     "inside the tests"), noisy))

    panel = copy.deepcopy(solution)  # JupyterLab's Create Assignment panel, merely opened
    for cell in panel.cells:
        meta = cell.metadata.get("nbgrader")
        if meta:
            meta.pop("cell_type", None)
            meta.setdefault("locked", False)
            if "points" in meta:
                meta["points"] = float(meta["points"])
    out.append((Kind(LAB_PANEL, "graded", "full", "every graded cell's nbgrader settings "
                     "rewritten by JupyterLab's Create Assignment panel (cell_type dropped, "
                     "points as floats)"), panel))

    out.append((Kind("patch-isclose", "graded", "partly", "partly-wrong with math.isclose, "
                     "np.isclose, np.allclose, torch.allclose replaced by 'always equal'"),
                _prepend(partly, first_q, PATCH_COMPARISONS)))
    out.append((Kind("patch-checks", "graded", "partly", "partly-wrong with every course_lib check "
                     "wrapped so that it never raises"),
                _prepend(partly, first_q, SWALLOW_CHECKS)))
    out.append((Kind("hijack", "graded", "no-records", "partly-wrong with an IPython input "
                     "transformer that turns every test cell into `pass`, and check_value & "
                     "co. replaced by no-ops"),
                _prepend(partly, first_q, HIJACK)))

    # a check replaced by a lambda that takes no keyword: the hidden call (shapes=...) raises
    # a TypeError in a cell partly-wrong loses anyway; the row must say what happened
    wrong = partly_wrong(wrongs, release)[0]
    check, gid = next((check, gid) for gid in wrong.loses
                      for check, kws in check_calls(_cell(source, gid).source) if kws)
    out.append((Kind("replaced-check", "graded", "partly", f"partly-wrong with {check} "
                     "replaced by `lambda f: None` (its test cell calls it with a keyword)",
                     detail=(f"the test cell's check was replaced or called wrongly in {gid} "
                             f"({check}: TypeError: <lambda>() got an unexpected keyword",)),
                _prepend(partly, wrong.cell, f"{check} = lambda f: None")))

    tampered = copy.deepcopy(partly)
    for i, gid in enumerate(tests):
        cell = _cell(tampered, gid)
        cell.source = "# my test passes, trust me\npass"
        cell.execution_count = 7
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="All tests passed!\n"),
            nbformat.v4.new_output("display_data", data={
                "application/vnd.course-check-record+json": {"check": "value", "what": gid,
                                                             "got": 1}}),
            nbformat.v4.new_output("execute_result", data={"text/plain": "1.0"},
                                   execution_count=7)]
        if i == 0:
            cell.metadata["nbgrader"]["points"] = 100
            cell.metadata["nbgrader"]["grade"] = False
    out.append((Kind("tampered", "graded", "partly", "partly-wrong with every test cell replaced "
                     "by `pass`, forged passing outputs, and a test cell's points and grade "
                     "flag changed",
                     detail=(f"{tests[-1]} were edited", "restored from the gradebook",
                             f"nbgrader settings of cell {tests[0]} were changed")), tampered))

    rearranged = copy.deepcopy(solution)
    twin = copy.deepcopy(_cell(rearranged, tests[0]))
    rearranged.cells.insert(rearranged.cells.index(_cell(rearranged, tests[0])) + 1, twin)
    rearranged.cells.append(copy.deepcopy(_cell(rearranged, first_q)))  # same cell id too
    rearranged.cells.remove(_cell(rearranged, tests[-1]))
    out.append((Kind("rearranged", "graded", "full", f"{tests[0]} pasted twice, {first_q} "
                     f"pasted at the end, {tests[-1]} deleted",
                     detail=(f"test cell {tests[0]} appeared 2 times",
                             f"cell {first_q} appeared 2 times",
                             f"test cell {tests[-1]} was missing: it was put back")),
                rearranged))

    out.append((Kind("interrupted", "timeout", "lose-last", f"an infinite loop in {last_q}",
                     detail=(f"timed out in {last_q}", "was interrupted")),
                _prepend(solution, last_q, "while True:\n    pass")))
    out.append((Kind("stuck", "timeout", "lose-last", f"an endless (sleeping) loop in {last_q} "
                     "that ignores the interrupt",
                     detail=(f"timed out in {last_q}", "ignored the interrupt")),
                _prepend(solution, last_q, "import signal, time\nsignal.signal(signal.SIGINT, "
                                           "signal.SIG_IGN)\nwhile True:\n    time.sleep(1)")))
    out.append((Kind("crash", "kernel_died", "lose-last", f"os._exit(1) in {last_q}",
                     detail=(f"kernel died in {last_q}",)),
                _prepend(solution, last_q, "import os\nos._exit(1)")))
    out.append((Kind("asks-input", "graded", "lose-last", f"input() in {last_q}",
                     detail=(f"{last_q} called input()",)),
                _prepend(solution, last_q, 'name = input("Your name? ")')))
    out.append((Kind("flood", "graded", "full", f"prints 10 MB in {last_q}",
                     detail=(f"the output of {last_q} was cut",)),
                _prepend(solution, last_q, 'for _ in range(10):\n    print("x" * 1_000_000)')))

    text = nbformat.writes(solution)
    out += [
        (Kind("not-json", "invalid_json", "none", "the notebook cut in half",
              detail=("not valid JSON",), files={"{a}/{a}.ipynb": text[: len(text) // 2].encode()}),
         None),
        (Kind("not-a-notebook", "invalid_notebook", "none", "JSON that is not a notebook",
              detail=("not a notebook",), files={"{a}/{a}.ipynb": b'{"answers": [1, 2, 3]}'}),
         None),
        (Kind("untitled", "graded", "full", "the notebook saved as Untitled.ipynb, the only "
              "one in its folder", detail=("graded Untitled.ipynb",),
              files={"{a}/Untitled.ipynb": text.encode()}), None),
        (Kind("two-copies", "misnamed", "none", "two notebooks, neither named as expected",
              detail=("Untitled.ipynb", "Copy of ", "which one to grade?"),
              files={"{a}/Untitled.ipynb": text.encode(),
                     "{a}/Copy of {a}.ipynb": text.encode()}), None),
        (Kind("no-notebook", "missing", "none", "an empty assignment folder",
              detail=("no notebook",), files={"{a}/notes.txt": b"forgot the notebook"}), None),
        (Kind("no-folder", "missing", "none", "another course's work only",
              detail=("no folder",), files={"other-course-work/essay.txt": b"..."}), None),
        (Kind("has space", "bad_student_id", "none", "a folder name nbgrader cannot use",
              detail=("not a usable student id",), files={"{a}/{a}.ipynb": text.encode()}),
         None),
    ]
    return out


def partly_wrong(wrongs, release) -> list:
    """The registry entry that loses fewest cells for every other answer cell (the 2nd, 4th,
    ...), skipping one whose cells overlap those already lost."""
    chosen, lost = [], set()
    for gid in _answers(release)[1::2]:
        options = sorted((w for w in wrongs if w.cell == gid and not w.alone),
                         key=lambda w: len(w.loses))
        for w in options:
            if not lost & set(w.loses):
                chosen.append(w)
                lost |= set(w.loses)
                break
    if not chosen:
        raise ValueError("the wrong-answer registry has no entry to build partly-wrong from")
    return chosen


def write(kinds: list[tuple[Kind, object]], subs, assignment: str) -> None:
    """Write the class's submissions under ``subs/<student>/``."""
    for kind, nb in kinds:
        folder = subs / kind.student
        if nb is not None:  # raw JSON: nbformat.write would give a pasted cell a new id
            path = folder / assignment / f"{assignment}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        for rel, data in kind.files.items():
            path = folder / rel.format(a=assignment)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def expected_scores(kind: Kind, cells: dict[str, float], wrongs, release,
                    reporting: set[str]) -> dict[str, float]:
    """``{grade_id: expected score}`` for ``kind``, from the cells' points, the registry's
    claims for partly-wrong and the cells whose checks report (``reporting``)."""
    if kind.expect == "full":
        return dict(cells)
    if kind.expect == "none":
        return {g: 0.0 for g in cells}
    partly = {g: p for g, p in cells.items()}
    for w in partly_wrong(wrongs, release):
        partly.update({g: 0.0 for g in w.loses})
    if kind.expect == "partly":
        return partly
    if kind.expect == "no-records":
        return {g: (0.0 if g in reporting else p) for g, p in partly.items()}
    if kind.expect == "lose-last":
        lost = set(tests_after_last_answer(release))
        return {g: (0.0 if g in lost else p) for g, p in cells.items()}
    raise ValueError(f"unknown expectation {kind.expect!r}")


def dumps(x) -> str:
    return json.dumps(x, indent=1, sort_keys=True)
