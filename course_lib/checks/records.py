"""What a check reports to the grader: the record format, published and read back.

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
the reference's one for one (:func:`course_tools.scoring.same_records`), compared in the grader's process with
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
