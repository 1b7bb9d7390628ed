"""Every fixed answer of every assignment is sealed.

A *fixed* answer is a value, not a function: a test-yourself question, a recap row, a figure
from the field.  Its check cannot try hidden inputs, so whatever it compares with is on the
learner's disk; it must compare with a sealed answer (course_lib.checks.sealed) and publish
only ``sealed`` records.  Which checks are fixed is decided here, not listed by hand: each
solution notebook's model answer is run in-process (setup, answers and the cells between, test
cells skipped), and in every test cell each top-level call of a ``course_lib.checks`` function
whose evaluated arguments hold no callable is a fixed check.  Each is then run with records on
(``COURSE_CHECK_RECORDS=1``: records print as ``COURSE-CHECK-RECORD {json}`` lines) and must:

* pass on the model answer, publishing at least one record, every one ``sealed``, which the
  grader's comparison (:func:`course_tools.scoring.same_record`) also passes;
* run no code of course_lib outside ``course_lib/checks`` (it may not compute the answer with
  the counters, even though course_lib could);
* leave no answer in plain: no usual spelling of a recorded number (4 significant figures or
  more, the rule of tests/test_no_leaks.py) appears in course_lib's source.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

import course_lib
from course_lib.checks import records, sealed, watch_calls
from course_tools import scoring
from conftest import torch_on_one_thread
from scans import _forms
from wrong_answers import strip_solution_markers

# the notebooks' plots pass tensors to matplotlib, which warns about numpy 2's copy keyword
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:matplotlib")

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.parent.name for p in (REPO / "solutions").glob("*/*.ipynb")
                     if p.stem == p.parent.name)
LIB = Path(course_lib.__file__).resolve().parent
PREFIX = "COURSE-CHECK-RECORD "


@dataclass
class FixedCall:
    cell: str
    call: str
    records: list = field(default_factory=list)
    error: str = ""
    used: list = field(default_factory=list)


def _code(cell) -> str:
    src = strip_solution_markers(cell.source)
    return "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))


def _is_check(fn) -> bool:
    return callable(fn) and (getattr(fn, "__module__", "") or "").startswith("course_lib.checks")


def _lib_calls(used: list):
    """Record calls into course_lib outside course_lib/checks (its top-level modules), but for the tutor, which
    wraps every check to speak in a notebook and computes nothing."""
    return watch_calls(used, dict.fromkeys(p.name for p in LIB.glob("*.py") if p.name != "tutor.py"))


def _fixed_call(node: ast.stmt, ns: dict) -> bool:
    """Is ``node`` a call of a course check whose arguments hold no callable?"""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    call = node.value

    def value(expr):
        return eval(compile(ast.Expression(expr), "<test cell>", "eval"), ns)  # noqa: S307

    if not _is_check(value(call.func)):
        return False
    args = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    args += [k.value for k in call.keywords]
    return bool(args) and not any(callable(value(a)) for a in args)


def run_fixed_checks(name: str) -> list[FixedCall]:
    """Run ``name``'s model answer and each of its fixed checks (see the module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nb = nbformat.read(REPO / "solutions" / name / f"{name}.ipynb", as_version=4)
    ns: dict = {"__name__": "__main__"}
    found: list[FixedCall] = []
    cwd = os.getcwd()
    os.chdir(REPO / "solutions" / name)
    try:
        with torch_on_one_thread():
            for cell in nb.cells:
                if cell.cell_type != "code":
                    continue
                meta = cell.metadata.get("nbgrader", {})
                src = _code(cell)
                if not (meta.get("grade") and not meta.get("solution")):
                    with contextlib.redirect_stdout(io.StringIO()):
                        exec(compile(src, cell.get("id", "cell"), "exec"), ns)  # noqa: S102
                    plt.close("all")
                    continue
                for node in ast.parse(src).body:  # a test cell: only its fixed checks run
                    if not _fixed_call(node, ns):
                        if not isinstance(node, ast.Expr):  # an assignment a later call may use
                            exec(compile(ast.Module([node], []), meta["grade_id"], "exec"), ns)  # noqa: S102
                        continue
                    fc = FixedCall(meta["grade_id"], ast.get_source_segment(src, node))
                    out = io.StringIO()
                    os.environ[records.ENV] = "1"
                    try:
                        with contextlib.redirect_stdout(out), _lib_calls(fc.used):
                            exec(compile(ast.Module([node], []), fc.cell, "exec"), ns)  # noqa: S102
                    except Exception as e:  # noqa: BLE001 - reported by the test
                        fc.error = f"{type(e).__name__}: {e}"
                    finally:
                        del os.environ[records.ENV]
                    fc.records = [json.loads(ln[len(PREFIX):]) for ln in out.getvalue().splitlines()
                                  if ln.startswith(PREFIX)]
                    found.append(fc)
    finally:
        os.chdir(cwd)
        plt.close("all")
    return found


def _lib_source() -> str:
    return "\n".join(p.read_text() for p in sorted(LIB.rglob("*.py")))


def _spelled(form: str, text: str) -> bool:
    import re
    return form in text and bool(re.search(rf"(?<![\w.]){re.escape(form)}(?!\d)", text))


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_fixed_answer_is_sealed(name, monkeypatch):
    monkeypatch.delenv(records.ENV, raising=False)
    calls = run_fixed_checks(name)
    assert calls, f"{name}: no test cell checks a fixed answer (is the detection broken?)"
    source = _lib_source()
    problems = []
    for fc in calls:
        where = f"{name} {fc.cell}: {fc.call}"
        if fc.error:
            problems.append(f"{where} fails on the model answer: {fc.error}")
        if not fc.records:
            problems.append(f"{where} publishes no record")
        plain = sorted({r.get("check") for r in fc.records} - {"sealed"})
        if plain:
            problems.append(f"{where} publishes {plain} records: its answer is not sealed")
        for r in fc.records:
            if r.get("check") != "sealed":
                continue
            if r.get("seal", {}).get("what") != r.get("what"):
                problems.append(f"{where}: record {r.get('what')!r} carries another seal")
            if not scoring.same_record(r, r):
                problems.append(f"{where}: the grader would fail the model answer's "
                                f"{r.get('what')!r}")
            got = r.get("got")
            if isinstance(got, (int, float)) and not isinstance(got, bool) and got:
                seal = r.get("seal", {})  # its size bin, for true size words (course_lib.checks.sealed)
                near = {sealed.bin_digest(seal.get("salt", ""), sealed.size_bin(got) + d) for d in (-1, 0, 1)}
                if seal.get("size") not in near:
                    problems.append(f"{where}: {r.get('what')!r} has no size bin of its value "
                                    "(seal it again with python -m course_tools.seal)")
            for form in sorted(_forms(got)) if isinstance(got, (int, float)) else ():
                if _spelled(form, source):
                    problems.append(f"{where}: {r.get('what')!r} appears in course_lib's "
                                    f"source as {form}")
        if fc.used:
            problems.append(f"{where} runs course_lib code outside the checks (it computes "
                            f"its answer?): {sorted(set(fc.used))[:5]}")
    assert not problems, "\n".join(problems)


def test_the_detection_sees_fixed_and_function_checks(tmp_path, monkeypatch):
    """The rule on made-up cells: a value argument is fixed, a function argument is not,
    whatever the check's name; a call that is not a course check is not a check."""
    from course_lib.checks import lesson1
    ns = {"lesson1": lesson1, "f": lambda **k: 0, "x": 3, "print": print}
    body = ast.parse("lesson1.check_tys1(x, x)\nlesson1.check_gpt2_params(f)\n"
                     "lesson1.check_tys3(width_factor=x, layers_factor=f)\nprint(x)").body
    assert [_fixed_call(n, ns) for n in body] == [True, False, False, False]


def test_the_source_scan_finds_a_planted_answer():
    """The scan is not blind: an answer written in plain, in any usual spelling, is found."""
    for value in (86.99073028564453, 0.8507630225817855, 7615616512):
        for form in _forms(value):
            assert _spelled(form, f"EXPECTED = {form}  # the answer\n"), form
    assert not _spelled("86.99", "x = 186.995")
