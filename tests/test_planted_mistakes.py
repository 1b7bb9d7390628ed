"""The battery of planted mistakes: every registered wrong answer (tests/wrong_answers/) fails
the visible part of its own test cell, in the learner's notebook, with one line of a course
check's feedback (a :class:`CheckFailed`, not a crash), and no cell before that test (a demo
that uses the answer) crashes; except the entries an assignment lists in ``HIDDEN_ONLY``, which
only the hidden tests catch (to show they earn their place).  That each one loses exactly its
points at grading is tests/test_grading.py's.

The notebook is the release with the model answer's code in every answer cell (the learner's
view: test cells without their hidden block), run in order as a kernel would.  It is run once
per assignment, keeping the namespace as it stood before each answer cell; an entry starts from
there with its own code in that cell and runs on to its test cell.
"""
from __future__ import annotations

import contextlib
import io
import math
import re
from functools import cache
from pathlib import Path

import nbformat
import pytest

import wrong_answers
from conftest import REAL_ASSIGNMENTS
from course_lib.checks import CheckFailed

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

REPO = Path(__file__).resolve().parents[1]
HIDDEN = "### BEGIN HIDDEN TESTS"


def _hidden_only(assignment: str) -> set[str]:
    module = __import__(f"wrong_answers.{assignment}", fromlist=["WRONG"])
    return set(getattr(module, "HIDDEN_ONLY", set()))


@cache
def _cells(assignment: str) -> list[tuple[str, str]]:
    """``[(grade_id or "", source)]`` of the learner's notebook with the model answers."""
    release = nbformat.read(REPO / "notebooks" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    nb = wrong_answers.solution_submission(release, source)
    return [(c.metadata.get("nbgrader", {}).get("grade_id", ""), c.source.split(HIDDEN)[0])
            for c in nb.cells if c.cell_type == "code"]


def _run(cells, ns: dict) -> None:
    for gid, src in cells:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(src, f"<cell {gid or 'demo'}>", "exec"), ns)  # noqa: S102


@cache
def _model_run(assignment: str) -> tuple[dict[str, dict], list[tuple[str, str, str]], dict[str, dict]]:
    """The learner's notebook run once with the model answers: the namespace just before each
    answer cell (``{grade_id: namespace}``); every cell as the learner reads it, in order
    (``(grade_id, kind, text)``: a markdown cell's text, a code cell's release source, and apart
    (kind ``"output"``) what it printed); and the numbers each answer cell sets
    (``{grade_id: {name: value}}``)."""
    release = nbformat.read(REPO / "notebooks" / assignment / f"{assignment}.ipynb", as_version=4)
    code = iter(_cells(assignment))
    ns: dict = {"__name__": "__main__"}
    before, cells, values = {}, [], {}
    for cell in release.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type != "code":
            cells.append((gid, "markdown", cell.source))
            continue
        _, src = next(code)
        if gid.startswith("q-"):
            before[gid] = dict(ns)
        old, printed = dict(ns), io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(src, f"<cell {gid or 'demo'}>", "exec"), ns)  # noqa: S102
        cells += [(gid, "code", cell.source.split(HIDDEN)[0]), (gid, "output", printed.getvalue())]
        if gid.startswith("q-"):  # the names the release asks this cell to set
            asked = set(re.findall(r"\b([A-Za-z_]\w*)\b", cell.source.split(HIDDEN)[0]))
            values[gid] = {f"{k}{part}": x for k, v in ns.items() if k in asked and old.get(k) is not v
                           for part, x in _parts(v) if _number(x)}
    return before, cells, values


def _before(assignment: str) -> dict[str, dict]:
    """The model-answer namespace just before each answer cell, ``{grade_id: namespace}``."""
    return _model_run(assignment)[0]


PLANTED = [(a, w) for a in REAL_ASSIGNMENTS for w in wrong_answers.load(a)
           if w.why not in _hidden_only(a)]


@pytest.mark.parametrize("assignment, wrong", PLANTED,
                         ids=[f"{a}:{w.cell}:{w.why[:40]}" for a, w in PLANTED])
def test_a_planted_mistake_fails_its_visible_test_in_one_line(assignment, wrong):
    cells = _cells(assignment)
    gids = [g for g, _ in cells]
    own = "t-" + wrong.cell[2:]
    assert wrong.cell in gids and own in gids, f"{wrong.cell} or {own} is not in the notebook"
    ns = dict(_before(assignment)[wrong.cell])
    start, stop = gids.index(wrong.cell), gids.index(own)
    _run([(wrong.cell, wrong.source)], ns)
    _run(cells[start + 1:stop], ns)  # the demos between answer and test must not crash
    with pytest.raises(CheckFailed) as caught:
        _run([cells[stop]], ns)
    message = str(caught.value).strip()
    assert message and "\n" not in message, message


@pytest.mark.parametrize("assignment", REAL_ASSIGNMENTS)
def test_hidden_only_entries_are_registered(assignment):
    assert _hidden_only(assignment) <= {w.why for w in wrong_answers.load(assignment)}


# --- no answer told before its test -----------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.]*\d|-[A-Za-z])(\s*%)?"
                     r"(?:\s*(KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB)\b)?")
"""A number as prose writes it (``124,439,808``, ``8.75``, ``31 %``), not a part of a name or of
a compound such as ``16-bit``, with its unit of bytes if one follows."""
_UNITS = ("kib", "mib", "gib", "tib", "kb", "mb", "gb", "tb")


def _parts(v) -> list[tuple[str, object]]:
    """``v`` as ``[("", v)]``, or a dict's, list's or tuple's items (one level) as ``[("[key]",
    item), ...]``: the numbers an answer holds."""
    if isinstance(v, dict):
        return [(f"[{k!r}]", x) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [(f"[{i}]", x) for i, x in enumerate(v)]
    return [("", v)]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _says(text: str, value: float, unit: str | None = None) -> str | None:
    """The first number written in ``text`` that is ``value`` to the figures it shows (a
    percentage read as a fraction), with at least two significant figures, and not in another
    unit of bytes than ``unit`` (e.g. ``"kib"``); else None."""
    for m in _NUMBER.finditer(text):
        whole, frac, pct = m.group(1).replace(",", ""), m.group(2) or "", m.group(3)
        if unit and m.group(4) and m.group(4).lower() != unit:
            continue
        written = float(whole + frac)
        figures = len((whole + frac[1:]).lstrip("0"))
        target = 100 * value if pct else value
        if figures >= 2 and abs(written - target) <= 0.5 * 10 ** -max(len(frac) - 1, 0) + 1e-12:
            return m.group(0).strip()
    return None


TOLD_ON_PURPOSE = {
    ("lesson5", "q-tys2", "tys2_prefill_flops_per_byte"):
        "the answer equals the question's 512 tokens: 2 FLOPs per parameter per token over 2 "
        "bytes per parameter, times 512 tokens; the question cannot hide its own input",
}
"""Answers whose value the prose before them writes for a reason other than telling it."""


def _told(assignment: str) -> list[str]:
    """Where the learner's notebook writes an answer's value before that answer's test cell:
    in a markdown cell or a code cell's source anywhere from the previous test cell to this
    answer's test, or in what a cell printed before the answer cell ran (an output after it
    may echo the learner's own value)."""
    _, cells, values = _model_run(assignment)
    return _told_in(assignment, cells, values)


def _told_in(assignment: str, cells, values) -> list[str]:
    gids = [g for g, _, _ in cells]
    found = []
    for q, numbers in values.items():
        t = "t-" + q[2:]
        if t not in gids:
            continue
        stop, answer = gids.index(t), gids.index(q)
        start = max((i for i in range(answer) if gids[i].startswith("t-")), default=-1) + 1
        for i in range(start, stop):
            gid, kind, text = cells[i]
            if gid == q or (kind == "output" and i > answer):
                continue
            for name, v in numbers.items():
                if (abs(v) >= 10 or v != int(v)) and (assignment, q, name) not in TOLD_ON_PURPOSE:
                    unit = next((u for u in _UNITS if name.split("[")[0].endswith("_" + u)), None)
                    said = _says(text, v, unit)
                    if said:
                        found.append(f"{q}: {name} = {v!r} is written as {said!r} in a {kind} "
                                     f"cell ({gid or 'cell ' + str(i)}) before {t}")
    return found


@pytest.mark.parametrize("assignment", REAL_ASSIGNMENTS)
def test_no_answer_is_told_before_its_test(assignment):
    """The value an answer cell sets (a test-yourself number, a recap entry) is not written in
    the prose, a code cell or a demo's printout between the previous test and its own test: the
    explanation comes after the test cell (the feedback issue's rule)."""
    assert _told(assignment) == []


def test_the_told_answer_scan_finds_a_planted_one():
    """The scan above can fail: a number written to the figures shown, with commas or as a
    percentage, is found; one that differs in a shown figure is not."""
    assert _says("about 124,439,808 parameters", 124439808) == "124,439,808"
    assert _says("the cache needs 8.75 GiB", 8.7490234) == "8.75 GiB"
    assert _says("31% of the parameters", 0.3141) == "31%"
    assert _says("8.76 GiB, 2 heads", 8.7490234) is None and _says("v2 is 16", 1.6) is None
    assert _says("in 16-bit", 16) is None and _says("32.000 MiB", 32.0, unit="kib") is None
    assert _says("a tile of 32 KiB", 32.0, unit="kib") == "32 KiB"


def test_the_told_answer_scan_reads_the_question_and_what_demos_printed_before_it():
    cells = [("t-a", "code", "check_a(a)"), ("", "markdown", "A cache of 8.75 GiB; the tile 32 KiB."),
             ("", "output", "8.749 GiB"), ("q-b", "code", "raise NotImplementedError()"),
             ("", "output", "yours: 8.75 GiB"), ("t-b", "code", "check_b(b_gib)")]
    found = _told_in("x", cells, {"q-b": {"b_gib": 8.7490234}})
    assert [f.split(" in a ")[1].split(" cell")[0] for f in found] == ["markdown", "output"]
    # before the previous test, and a demo's echo after the answer, are not the question's
    assert _told_in("x", cells[:1] + cells[3:], {"q-b": {"b_gib": 8.7490234}}) == []
