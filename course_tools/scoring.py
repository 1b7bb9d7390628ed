"""Scores from the facts a grading job wrote, judged against the model answer's run.

Every code cell a job ran left one line of facts (course_tools.preprocessors.GuardedExecute):
its status, the errors it raised, what it wrote to stderr, the check records it published.
The model answer (the source notebook) is graded the same way first, as the *reference*.

A test cell earns its points if and only if

1. it ran to the end (not timed out, not stopped, the kernel alive), and
2. it raised no error (stderr and a last value are not held against it: nbgrader's
   ``determine_grade`` would zero the first and read the second as partial credit), and
3. if the reference's run of that cell published check records, the learner's run published
   the same checks, in the same order, each with a value that passes the reference record
   (:func:`same_records`, evaluated here, in the grader's process).

So a wrong answer earns nothing even when code in the kernel made the check pass there (a
replaced ``math.isclose``, ``np.allclose`` or check function, an exception handler that
swallows errors): the values the learner's code produced still have to be right.  Condition 3
cannot apply to a test cell whose checks publish nothing (a bare ``assert``): such a cell is
only as strong as the kernel (course_tools/README.md, "Threat model").
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

from course_lib.checks.sealed import Sealed, judge

from .feedback import CellResult, redact

_NO_MESSAGE = {
    "NotImplementedError": "an answer this test uses is not written yet (it still raises "
                           "NotImplementedError)",
    "AssertionError": "a test failed (it gives no message)",
    "StdinNotImplementedError": "input() was called: a graded notebook cannot ask for input",
}
MISMATCH = ("the checks in this test did not report the results the grader expects ({why}). "
            "If your notebook changes or replaces a check, a comparison function or the test "
            "itself, undo that and run the test again")

REPLACED = ("the test cell's check {check} was replaced or called wrongly: calling it raised "
            "{error}. If your notebook assigns to {check} (or redefines it), undo that, "
            "restart the kernel and run the test again")
"""A test cell's own call of its check failed (not the learner's function inside it)."""
_BAD_CALL = re.compile(r"^(?P<fn>[\w.<>]+)\(\) (?:got an unexpected keyword argument "
                       r"'(?P<kw>\w+)'|got multiple values for argument '(?P<kw2>\w+)'|"
                       r"takes .* positional arguments? but .* given|missing \d+ required)")
"""How Python says a call's arguments do not fit the function (TypeError)."""


def check_calls(source: str) -> list[tuple[str, tuple[str, ...]]]:
    """``[(check, keyword names)]`` of the ``check_*`` calls in a test cell's source
    (``("lesson4.check_rotary", ("cases",))``); [] if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [(ast.unparse(n.func), tuple(k.arg for k in n.keywords if k.arg))
            for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "attr", None) or getattr(n.func, "id", "")).startswith("check_")]


def replaced_check(e: dict, calls: list[tuple[str, tuple[str, ...]]]) -> str:
    """The check a test cell called with arguments it does not take (a learner's lambda or
    def in its place: ``<lambda>() got an unexpected keyword argument 'cases'``), or "".
    Told by the TypeError's function name (a check's) or keyword (one the test cell passes
    to a check, which no check passes on to the learner's function)."""
    for err in e.get("errors", []):
        m = _BAD_CALL.match((err.get("evalue") or "").strip())
        if err.get("ename") != "TypeError" or not m:
            continue
        kw, fn = m["kw"] or m["kw2"], m["fn"].split(".")[-1]
        for check, keywords in calls:
            if fn == check.split(".")[-1] or (kw and kw in keywords):
                return check
    return ""


_OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "Cannot allocate memory")
"""How numpy, torch and the OS say an allocation failed (past ``--memory-limit``)."""

OVERRULED = "passed in the notebook but not the grader's comparison"
"""Said (in a student's detail and the report) of test cells that raised nothing in the kernel
but whose check records did not match the model answer's."""


class ReferenceError_(RuntimeError):
    """The model answer does not pass its own tests (the grading cannot be trusted)."""


@dataclass
class JobFacts:
    """What one job's progress file says: the facts of each cell that finished (by
    ``(notebook, grade_id or "#index")``), the cell running when the job stopped, and the
    notebooks whose kernel started."""
    cells: dict = field(default_factory=dict)
    by_index: dict = field(default_factory=dict)
    running: dict | None = None
    notebooks: set = field(default_factory=set)

    @classmethod
    def from_events(cls, events: list[dict]) -> "JobFacts":
        f = cls()
        for e in events:
            kind = e.get("event")
            if kind == "kernel":
                f.notebooks.add(e.get("notebook"))
            elif kind == "start":
                f.running = e
            elif kind == "end":
                key = (e.get("notebook"), e.get("grade_id") or f"#{e.get('index')}")
                f.cells[key] = e
                f.by_index[(e.get("notebook"), e.get("index"))] = e
                if f.running and f.running.get("index") == e.get("index") \
                        and f.running.get("notebook") == e.get("notebook"):
                    f.running = None
        return f


def cell_label(e: dict) -> str:
    """How a learner finds a cell: its grade_id, else its position."""
    return e.get("grade_id") or f"cell {int(e.get('index', 0)) + 1}"


def describe_errors(e: dict) -> str:
    """``"Type: message"`` lines of a cell's errors (no traceback)."""
    parts = []
    for err in e.get("errors", []):
        name, value = err.get("ename", "Error"), (err.get("evalue") or "").strip()
        if name == "CellTimeoutError" and not value:
            continue  # said by the timeout line
        parts.append(f"{name}: {value or _NO_MESSAGE.get(name, '(no message)')}")
    return "\n".join(parts)


def reference_records(facts: JobFacts, tests: list[tuple[str, str, float]]) -> dict:
    """``{(notebook, grade_id): records}`` from the reference run, which must have passed
    every test cell (else :class:`ReferenceError_` naming the cells)."""
    bad, out = [], {}
    for nb, gid, _ in tests:
        e = facts.cells.get((nb, gid))
        if e is None:
            bad.append(f"{gid}: did not run")
        elif e.get("status") != "ok" or e.get("errors"):
            bad.append(f"{gid}: {e.get('status')} {describe_errors(e)[:300]}")
        else:
            out[(nb, gid)] = e.get("records", [])
    if bad:
        raise ReferenceError_("the model answer (the source notebook) fails its own tests: "
                              + "; ".join(bad))
    return out


def _timeout_words(e: dict, cell_timeout: int) -> str:
    if e.get("status") == "unresponsive":
        return (f"it ran past the {cell_timeout} s limit per cell and ignored the interrupt, "
                "so the kernel was stopped")
    return f"it ran past the {cell_timeout} s limit per cell and was interrupted"


def score_cells(facts: JobFacts, tests: list[tuple[str, str, float]], reference: dict,
                hidden: list[str], cell_timeout: int, stopped: str = "",
                calls: dict | None = None) -> tuple[list[CellResult], dict[str, str]]:
    """Score every test cell of an assignment from one job's facts.

    Args:
        facts: the job's facts.
        tests: ``[(notebook, grade_id, points)]`` in notebook order.
        reference: :func:`reference_records`.
        hidden: hidden-test lines (messages quoting one are withheld).
        cell_timeout: seconds per cell (for messages).
        stopped: why the job stopped early, if it did ("" otherwise).
        calls: ``{(notebook, grade_id): check_calls(test cell source)}`` (a test cell whose
            call of its check failed is said so, see :func:`replaced_check`).

    Returns ``([CellResult], {answer grade_id: problem}, [notes on other cells])``.
    """
    cells, overruled, replaced = [], [], []
    dead = [e for e in facts.by_index.values() if e.get("status") == "dead"]
    for nb, gid, points in tests:
        e = facts.cells.get((nb, gid))
        score, message, note = 0.0, "", ""
        if e is None:
            message = f"not run: {stopped or 'the notebook stopped before this cell'}"
        elif e.get("status") == "not_run":
            message = f"not run: {e.get('reason') or stopped}"
        elif e.get("status") in ("timeout", "unresponsive"):
            message = "\n".join(x for x in (_timeout_words(e, cell_timeout),
                                            describe_errors(e)) if x)
        elif e.get("status") == "dead":
            message = "the kernel died while this test ran"
        elif e.get("errors"):
            message = describe_errors(e)
            check = replaced_check(e, (calls or {}).get((nb, gid), []))
            if check:
                message = REPLACED.format(check=check, error=message)
                replaced.append(f"{gid} ({check}: {describe_errors(e)})")
            before = [d for d in dead if d.get("notebook") == nb
                      and d.get("index", 0) < e.get("index", 0)]
            if before and any(x.get("ename") == "NameError" for x in e.get("errors", [])):
                message += (f"\n(the kernel died in {cell_label(before[-1])}: a new kernel ran "
                            "this test without what that cell defines)")
        else:
            ok, why = (same_records(e.get("records", []), reference.get((nb, gid), []))
                       if reference.get((nb, gid)) else (True, ""))
            if ok:
                score = float(points)
                if e.get("stderr", "").strip():
                    note = ("your code wrote to stderr during this test (a warning or a "
                            "message); that is not held against you")
            else:
                message = MISMATCH.format(why=why)
                overruled.append(gid)
        if e is not None and e.get("cut"):
            note = (note + "; " if note else "") + "its output was cut (too long)"
        cells.append(CellResult(gid, nb, score, float(points), False,
                                redact(message, hidden), note))
    answers, notes = {}, []
    if replaced:  # the learner's code stood in for a check: the instructor should know
        notes.append(redact(f"the test cell's check was replaced or called wrongly in "
                            f"{'; '.join(replaced)}", hidden))
    if overruled:  # the kernel said pass, the values said no: worth the instructor's look
        notes.append(f"{', '.join(overruled)} {OVERRULED} of the checks' results (a check, a "
                     "comparison function or a test changed?)")
    for (nb, key), e in facts.cells.items():
        if e.get("cut") and e.get("role") != "test":
            notes.append(f"the output of {cell_label(e)} was cut (too long)")
        if any(err.get("ename") == "StdinNotImplementedError" for err in e.get("errors", [])):
            notes.append(f"{cell_label(e)} called input(), which a graded notebook cannot "
                         "answer")
        if e.get("role") != "answer":
            continue
        text = describe_errors(e)
        if e.get("status") in ("timeout", "unresponsive"):
            text = "\n".join(x for x in (_timeout_words(e, cell_timeout), text) if x)
        elif e.get("status") == "dead":
            text = "the kernel died while this cell ran"
        if text and any(m in text for m in _OUT_OF_MEMORY):
            text += ("\n(the grader limits the memory a notebook may use: this cell asked for "
                     "more)")
        if text:
            answers[key] = redact(text, hidden)
    return cells, answers, notes


# --- a learner's check records against the reference's (course_lib.checks.records' format) ---

def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def same_value(got, ref: dict) -> bool:
    """Does learner value ``got`` pass a ``value`` record of the reference (its ``got``, with
    its ``rel`` and ``integer``)?  Mirrors :func:`~course_lib.checks.check_value`."""
    expected, rel = ref.get("got"), float(ref.get("rel", 0.0))
    if not (_number(got) and _number(expected)):
        return False
    if ref.get("integer") and not float(got).is_integer():
        return False
    if rel == 0:
        return got == expected
    return math.isclose(got, expected, rel_tol=rel, abs_tol=0.0)


def same_close(got, ref: dict) -> bool:
    """Does an array record pass the reference's (same shape, every element within
    ``atol + rtol·|reference|``)?"""
    if not isinstance(got, dict) or got.get("shape") != ref.get("got", {}).get("shape"):
        return False
    a, b = got.get("values"), ref["got"].get("values")
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return False
    rtol, atol = float(ref.get("rtol", 0.0)), float(ref.get("atol", 0.0))
    for x, y in zip(a, b):
        if not (_number(x) and _number(y)) or abs(x - y) > atol + rtol * abs(y):
            return False
    return True


def same_record(student: dict, ref: dict) -> bool:
    """One learner record against the reference's record at the same place."""
    if not isinstance(student, dict) or student.get("check") != ref.get("check") \
            or student.get("what") != ref.get("what"):
        return False
    kind, got = ref.get("check"), student.get("got")
    if kind == "value":
        return same_value(got, ref)
    if kind in ("choice", "equal"):
        return got == ref.get("got")
    if kind == "sealed":
        try:
            sealed = Sealed.from_data(ref.get("seal") or {})
        except (TypeError, ValueError):
            return False
        return judge(sealed, got).ok
    if kind == "close":
        return same_close(got, ref)
    return False


def same_records(student: list[dict], reference: list[dict]) -> tuple[bool, str]:
    """``(match, reason)``: do a test cell's learner records match the reference's?

    Records are paired by ``(check, what)``, in order within a pair (so a check that walks a
    learner's dict in the learner's key order still pairs up): every reference record needs
    a learner record that passes it, and the learner may have none the reference lacks."""
    def groups(recs):
        out: dict[tuple, list] = {}
        for r in recs:
            if isinstance(r, dict):
                out.setdefault((str(r.get("check")), str(r.get("what"))), []).append(r)
        return out

    mine, theirs = groups(student), groups(reference)
    for key, refs in theirs.items():
        got = mine.get(key, [])
        if len(got) < len(refs):  # (no counts: they would tell how many checks are hidden)
            return False, f"check {key[1]!r} reported no result"
        for g, r in zip(got, refs):
            if not same_record(g, r):
                return False, f"check {key[1]!r} did not get the reference result"
    extra = sum(max(0, len(v) - len(theirs.get(k, []))) for k, v in mine.items())
    if extra or len(student) != sum(len(v) for v in mine.values()):
        return False, "the test reported results of checks it does not make"
    return True, ""
