"""How the checks speak in a notebook: one line, like a tutor, not a traceback.

In a Jupyter kernel (IPython), importing :mod:`course_lib.checks` installs one exception
handler (:func:`install`, IPython's ``set_custom_exc``) that changes how three kinds of error
*look*, never what they are (their type and message, which nbgrader and the grader's
feedback read, stay as raised):

* a failing check (:class:`~course_lib.checks.CheckFailed`): one line, the exercise and the
  check's message (the likely mistake, the hint), no frames of course_lib;
* an answer not written yet: nbgrader's stub ``raise NotImplementedError()`` inside the
  learner's function or answer cell, or a ``NameError`` for an answer's name (a test-yourself
  variable not set): one line, ``Exercise 1 is not answered yet: write gpt2_params above``;
* any other error raised while a check ran the learner's code: the traceback of the
  learner's own frames only (the cells), not course_lib's, the standard library's or torch's.

Every other error shows IPython's usual traceback.  A check that passes prints one line
(:func:`announce`), and says when the instructor's hidden tests will try more.  Demo cells that
use an answer run inside :func:`if_answered`, which turns "not answered yet" into a printed
note so that Run All goes on to the first test cell.

Which exercise a name or a check belongs to is data: ``checks/exercises.json``,
written by ``make release`` from the notebooks in ``solutions/`` (course_tools/release.py).
Outside IPython (tests, scripts) nothing here prints or changes anything.
"""
from __future__ import annotations

import functools
import json
import linecache
import os
import re
import sys
import types
from contextlib import contextmanager
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("checks") / "exercises.json"
"""``{assignment: {"answers": {name: label}, "checks": {check: {"label", "hidden"}}}}``."""

RED, GREEN, RESET = "\x1b[31m", "\x1b[32m", "\x1b[0m"

_LIB_DIR = os.path.dirname(os.path.abspath(__file__))
_OTHER_DIRS = tuple({os.path.abspath(p) + os.sep for p in
                     (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.__file__))})
_state = {"lesson": None, "depth": 0}
_waiting: dict[str, str] = {}
"""``{name: message}``: names a demo cell skipped by :func:`if_answered` did not define, with
the message of the answer it waited for (a later cell that reads one waits for it too)."""


@functools.lru_cache(maxsize=1)
def table() -> dict:
    """The exercise table (empty if the file is missing: messages then name no exercise)."""
    try:
        return json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the course
        return None
    return get_ipython()


def label_of(name: str) -> str | None:
    """The exercise an answer's name belongs to (``"Exercise 1"``, ``"Test yourself 2"``), in
    the lesson whose checks were imported last (before any, in any lesson); None if unknown."""
    t = table()
    order = [_state["lesson"]] if _state["lesson"] else sorted(t)
    for lesson in order:
        label = t.get(lesson, {}).get("answers", {}).get(name) if lesson else None
        if label:
            return label
    return None


def _is_learners(filename: str) -> bool:
    """Is this frame's file a notebook cell (not course_lib, the standard library or a
    package)?"""
    path = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
    return not (path.startswith(_LIB_DIR + os.sep) or path.startswith(_OTHER_DIRS))


def _frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


class NotAnswered(Exception):
    """A demo cell needs an answer that is not written yet (:func:`waiting_for`)."""


def waiting_for(name: str):
    """Raise :class:`NotAnswered` for the answer ``name``: for a demo cell that can tell that an
    earlier cell stopped short for want of it (inside :func:`if_answered`, a note)."""
    raise NotAnswered(name)


def not_answered(value: BaseException, tb=None) -> str | None:
    """The one-line message for an answer not written yet, or None if ``value`` is another
    error.  ``tb`` defaults to the exception's own traceback."""
    tb = tb if tb is not None else value.__traceback__
    if isinstance(value, NotAnswered) and value.args:
        name = value.args[0]
        return f"{label_of(name) or name} is not answered yet: write {name} above"
    if isinstance(value, NameError) and not isinstance(value, UnboundLocalError):
        name = getattr(value, "name", None)
        label = label_of(name) if name else None
        if label:
            return f"{label} is not answered yet: write {name} above and run its cell"
        return _waiting.get(name) if name else None
    if type(value) is not NotImplementedError or value.args:
        return None
    frames = list(_frames(tb))
    if not frames or not _is_learners(frames[-1].tb_frame.f_code.co_filename):
        return None  # raised by a library, not by an exercise's stub
    code = frames[-1].tb_frame.f_code
    if code.co_name != "<module>":
        label = label_of(code.co_name)
        return (f"{label} is not answered yet: write {code.co_name} above" if label
                else f"{code.co_name} is not answered yet: write it above")
    # An answer cell itself (a test-yourself question): name what the cell should set, as its comments
    # write it (``# name = ...`` or `name`), not a function the cell defines.
    source = "".join(linecache.getlines(code.co_filename))
    set_here = [n for line in source.splitlines() if line.lstrip().startswith("#") and "=" in line
                for n in re.findall(r"\w+", line.lstrip("# ").split("=")[0])]
    names = [n for n in [*re.findall(r"`(\w+)`", source), *set_here] if label_of(n)]
    if names:
        return (f"{label_of(names[0])} is not answered yet: set "
                f"{', '.join(dict.fromkeys(names))} in place of raise NotImplementedError()")
    return "this answer is not written yet: replace raise NotImplementedError() with it"


def _learner_traceback(shell, etype, value, tb):
    """IPython's traceback of ``value`` through the learner's frames only, or None if no
    course_lib frame is in it (nothing to hide)."""
    frames = list(_frames(tb))
    if not any(f.tb_frame.f_code.co_filename.startswith(_LIB_DIR + os.sep) for f in frames):
        return None
    mine = [f for f in frames if _is_learners(f.tb_frame.f_code.co_filename)]
    if not mine:
        return None
    new = None
    for f in reversed(mine):
        new = types.TracebackType(new, f.tb_frame, f.tb_lasti, f.tb_lineno)
    return shell.InteractiveTB.structured_traceback(etype, value, new, tb_offset=0)


def render(value: BaseException, tb=None, shell=None) -> list[str] | None:
    """How the handler shows ``value``: a list of lines (ANSI colours allowed), or None for
    IPython's usual traceback."""
    from .checks import CheckFailed

    tb = tb if tb is not None else value.__traceback__
    if isinstance(value, CheckFailed):
        return value._render_traceback_()
    message = not_answered(value, tb)
    if message:
        return [f"{RED}{message}{RESET}"]
    if shell is not None:
        return _learner_traceback(shell, type(value), value, tb)
    return None


def _handler(shell, etype, value, tb, tb_offset=None):
    if issubclass(etype, SyntaxError):
        shell.showsyntaxerror()
        return None
    try:
        lines = render(value, tb, shell)
    except Exception:  # never hide an error because its rendering failed
        lines = None
    if lines is not None:
        try:
            value._render_traceback_ = lambda: lines
        except (AttributeError, TypeError):
            pass
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    return None


def install() -> bool:
    """Install the handler in the running IPython (idempotent); False outside IPython."""
    shell = _ipython()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if getattr(shell, "_course_tutor", False):
        return True
    shell.set_custom_exc((Exception,), _handler)
    shell.events.register("post_run_cell", _say_passed)
    shell._course_tutor = True
    return True


def _say_passed(result) -> None:
    """At the end of a cell (IPython's ``post_run_cell``): print the pass lines its checks
    queued, only if the whole cell ran without an error.  A cell whose first check passes
    and whose second fails shows the failure alone, not "passed" and then the failure."""
    lines, _state["passed"] = _state.get("passed", []), []
    if getattr(result, "success", False):
        for line in dict.fromkeys(lines):
            print(line)


def passed_line(lesson: str, check: str) -> str:
    """What a passing visible check prints: ``Exercise 1 passed (the instructor's hidden tests
    try other inputs when your work is graded).``; where two checks test one exercise, the
    check's name follows its label (``Exercise 1 (unknown family) passed``)."""
    checks = table().get(lesson, {}).get("checks", {})
    entry = checks.get(check, {})
    label = entry.get("label") or check.removeprefix("check_").replace("_", " ")
    if entry.get("label") and sum(e.get("label") == label for e in checks.values()) > 1:
        label += f" ({check.removeprefix('check_').replace('_', ' ')})"  # two tests of one exercise
    more = " (the instructor's hidden tests try other inputs when your work is graded)" \
        if entry.get("hidden") else ""
    return f"{GREEN}{label} passed{more}.{RESET}"


def announce(namespace: dict, lesson: str) -> None:
    """Wrap every public ``check_*`` function defined in a lesson module's ``namespace`` (or
    :class:`~course_lib.checks.exercise.Check` declared there) so
    that, called from a notebook cell: a failure names the exercise, and a pass prints
    :func:`passed_line` once, when the whole cell has run without an error.  Only the visible
    test's call prints: its keyword names (the table's ``keywords``, none by default) are the
    learner's answers; a call with other keywords is a further test, and a check called by
    another check is part of it: neither prints.  Called at the end of each
    ``course_lib.checks.lessonN``; also records ``lesson`` as the current lesson."""
    from .checks import CheckFailed
    from .checks.exercise import Check

    _state["lesson"] = lesson
    install()
    for name, fn in list(namespace.items()):
        if not (name.startswith("check_") and (isinstance(fn, Check) or (
                isinstance(fn, types.FunctionType) and fn.__module__ == namespace.get("__name__")))):
            continue

        def wrapper(*args, __fn=fn, __name=name, **kwargs):
            outermost = _state["depth"] == 0
            _state["depth"] += 1
            try:
                result = __fn(*args, **kwargs)
            except CheckFailed as e:
                if outermost and not getattr(e, "exercise", None):
                    e.exercise = table().get(lesson, {}).get("checks", {}).get(__name, {}).get("label")
                raise
            finally:
                _state["depth"] -= 1
            if outermost and _ipython() is not None and sorted(kwargs) == table().get(lesson, {}).get(
                    "checks", {}).get(__name, {}).get("keywords", []):
                _state.setdefault("passed", []).append(passed_line(lesson, __name))
            return result

        namespace[name] = functools.wraps(fn)(wrapper)


@contextmanager
def if_answered():
    """Run a demo cell's code only as far as the answers it uses exist: an answer not written
    yet (:func:`not_answered`) prints a one-line note instead of raising (and closes the figures the
    block opened, which would show empty axes), so that Run All goes on; any other error is raised
    as usual::

        with checks.if_answered():
            print(gpt2_params(768, 12, 50257, 1024))
    """
    pyplot = sys.modules.get("matplotlib.pyplot")  # loaded by the notebook, if it plots
    figures = set(pyplot.get_fignums()) if pyplot else set()
    try:
        yield
    except (NotImplementedError, NameError, NotAnswered) as e:
        message = not_answered(e)
        if message is None:
            raise
        for n in set(pyplot.get_fignums()) - figures if pyplot else ():  # its figure, drawn in part: not shown
            pyplot.close(n)
        what, _, todo = message.partition(" is not answered yet: ")
        print(f"(This cell waits for {what}: {todo}, then run this cell again.)" if todo
              else f"(This cell waits for an answer: {message}.)")
        for name in _names_set_by(sys._getframe(2)):  # the cell (through contextlib's __exit__)
            _waiting.setdefault(name, message)
    else:
        for name in _names_set_by(sys._getframe(2)):
            _waiting.pop(name, None)


def _names_set_by(frame) -> set[str]:
    """The names the cell running in ``frame`` assigns."""
    import ast

    try:
        tree = ast.parse("".join(linecache.getlines(frame.f_code.co_filename)))
    except (SyntaxError, ValueError):
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
