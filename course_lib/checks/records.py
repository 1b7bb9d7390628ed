"""What a check reports to the grader, and how the grader compares it.

While a notebook is autograded (``course_tools.grade`` sets ``COURSE_CHECK_RECORDS=1`` in the
kernel's environment), each check primitive (:func:`~course_lib.checks.check_value`,
:func:`~course_lib.checks.check_choice`, :func:`~course_lib.checks.check_sealed`,
:func:`~course_lib.checks.check_close`, :func:`~course_lib.checks.check_equal`) publishes
one *record*: a display output of MIME type :data:`MIME` holding what was checked and the learner's value, e.g.
``{"check": "value", "what": "gpt2_params(d_model=64, ...)", "got": 123456, "rel": 0.0,
"integer": true}``.  Outside grading nothing is published (the learner sees no change).

The grader does not believe the kernel's verdict alone: learner code runs in the same kernel
and may have replaced comparison functions or the checks themselves.  It also runs the model
answer (the source notebook) in a kernel of its own and keeps that run's records as the
reference; a test cell earns its points only if it raised nothing *and* its records match
the reference's one for one (:func:`same_records`), compared in the grader's process with
the tolerance of the reference record.  See course_tools/README.md for the threat model.

Outside a kernel (tests, scripts) with the variable set, records are printed to stdout as
``COURSE-CHECK-RECORD {json}`` lines.
"""
from __future__ import annotations

import json
import math
import os

MIME = "application/vnd.course-check-record+json"
"""MIME type of a record in a cell's outputs."""

ENV = "COURSE_CHECK_RECORDS"
"""Environment variable that switches records on (value ``"1"``)."""

MAX_VALUES = 4096
"""Most elements of an array a record carries (larger arrays: an even sample of them)."""


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def json_safe(x):
    """``x`` as plain JSON data (numbers, strings, lists, dicts); anything else as its repr."""
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else repr(x)
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    return repr(x)[:200]


def publish(check: str, what: str, **fields) -> None:
    """Publish one record (no-op unless :func:`enabled`)."""
    if not enabled():
        return
    record = {"check": check, "what": str(what), **{k: json_safe(v) for k, v in fields.items()}}
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with the course
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display({MIME: record}, raw=True)
    else:
        print("COURSE-CHECK-RECORD " + json.dumps(record), flush=True)


def records_of(outputs) -> list[dict]:
    """The records among a cell's outputs (nbformat output dicts), in order."""
    found = []
    for out in outputs:
        if out.get("output_type") == "display_data" and MIME in out.get("data", {}):
            rec = out["data"][MIME]
            if isinstance(rec, str):
                try:
                    rec = json.loads(rec)
                except ValueError:
                    continue
            if isinstance(rec, dict):
                found.append(rec)
    return found


# --- the grader's comparison ---------------------------------------------------------------

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
        from .sealed import Sealed, judge
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
