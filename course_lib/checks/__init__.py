"""Checks that notebooks run on a learner's answers, with feedback that teaches.

A failing check raises :class:`CheckFailed` (an ``AssertionError``, so nbgrader scores the
cell 0) whose message says what kind of mistake the answer looks like: a known wrong answer
(the tied head counted twice, positions forgotten, ...) is named; otherwise the message says
whether the answer is too large or too small and by roughly what order of magnitude, never the
expected value itself.  Nothing here prints or warns (stderr would cost the cell its points).

Lesson-specific checks live in ``course_lib.checks.lessonN``.

Under grading, every primitive here (:func:`check_value`, :func:`check_choice`,
:func:`check_sealed`, :func:`check_close`, :func:`check_equal`) also publishes a *record* of what it compared (see
:mod:`course_lib.checks.records`), so the grader can compare the learner's values with the
model answer's outside the kernel.  Build lesson checks from these primitives: a check that
compares on its own (a bare ``assert``, ``torch.allclose``) is decided in the kernel only.
Answers the notebook must not reveal (test-yourself questions) are stored sealed
(:mod:`course_lib.checks.sealed`) and checked with :func:`check_sealed`.
"""
from __future__ import annotations

import builtins
import math
import os
import re
import sys
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Callable, Mapping, Sequence

import course_lib

from . import records as _records
from .sealed import Sealed, as_number, as_option, judge as _judge
from ..tutor import NotAnswered, announce, if_answered, not_answered, waiting_for


class CheckFailed(AssertionError):
    """A learner's answer is wrong; the message is the feedback.

    In a notebook it shows as one line, the exercise and the message, not as a traceback
    (IPython calls ``_render_traceback_``; :mod:`course_lib.tutor`).  Its type and
    message, which nbgrader and the grader's feedback read, are those raised."""

    exercise: str | None = None
    """The exercise whose check failed (``"Exercise 1"``), set by :func:`tutor.announce`."""

    def _render_traceback_(self) -> list[str]:
        from ..tutor import RED, RESET
        lead = f"{self.exercise}: " if self.exercise else ""
        return [f"{RED}✗ {lead}{self}{RESET}"]


_LIB_DIR = os.path.dirname(os.path.abspath(course_lib.__file__))
COUNTER_MODULES = ("params.py", "memory.py", "flops.py")
"""course_lib modules that compute the answers to counting exercises; an exercise's own
function may not call them (it must build the count)."""


def _as_number(x, what: str, whole: bool = False):
    try:
        return as_number(x, what, whole)
    except ValueError as e:
        raise CheckFailed(str(e)) from None


_LADDER = (1, 1.1, 1.2, 1.3, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 10)
"""The figures a size word rounds a factor to, times a power of ten (the nearest in log scale
is within 1.16× of the ratio)."""


def about(ratio: float) -> str:
    """A ratio > 1 in words a learner can trust: ``"by about 4%"`` (``"by less than 1%"``) below 1.1, else
    ``"by a factor of about k"``, k the nearest in log scale of :data:`_LADDER` times a power of ten."""
    if ratio < 1.1:
        return _percent(ratio - 1)
    power = 10 ** math.floor(math.log10(ratio))
    m = ratio / power
    k = min(_LADDER, key=lambda c: abs(math.log(m / c))) * power
    return f"by a factor of about {k:,.0f}" if k >= 10 else f"by a factor of about {k:g}"


def size_words(got: float, expected: float) -> str:
    """What is wrong with the size of ``got`` (not within tolerance of ``expected``), from the
    ratio itself: ``"it is too large by a factor of about 1.2"``, ``"... too small by about
    3%"``; zero and a wrong sign are named.  Never the expected value."""
    if expected == 0:
        return "it should be zero"
    if got == 0:
        return "you returned 0"
    if (got > 0) != (expected > 0):
        return "its sign is wrong"
    ratio = got / expected  # a shortfall reads as a percentage of the answer, a factor beyond 10 %
    if ratio > 1:
        return f"it is too large {about(ratio)}"
    return f"it is too small {about(1 / ratio) if ratio < 1 / 1.1 else _percent(1 - ratio)}"


def _percent(x: float) -> str:
    """A relative difference ``x`` (0 to 0.1) in words: under 1 % says so."""
    return "by less than 1%" if x < 0.01 else f"by about {round(100 * x)}%"


def check_value(got, expected, *, what: str, mistakes: Mapping[str, float] | None = None,
                rel: float = 0.0, integer: bool = False) -> None:
    """Pass if ``got`` equals ``expected`` (within relative tolerance ``rel``), else raise
    :class:`CheckFailed` with a diagnosis.

    Args:
        got: the learner's answer (a Python or numpy/torch scalar).
        expected: the right answer (never shown).
        what: what the answer is, with its unit, e.g. ``"GPT-2 parameters"``.
        mistakes: ``{diagnosis: wrong value}``: the answers that known mistakes give; a match
            names the mistake.
        rel: relative tolerance (0 for exact integer counts).
        integer: the answer must be a whole number (a count of parameters or bytes).
    """
    got = _as_number(got, what)
    _records.publish("value", what, got=got, rel=rel, integer=integer)
    _as_number(got, what, whole=integer)

    def same(a, b):
        return a == b if rel == 0 else math.isclose(a, b, rel_tol=rel, abs_tol=0.0)

    if same(got, expected):
        return
    for diagnosis, wrong in (mistakes or {}).items():
        if wrong != expected and same(got, wrong):
            raise CheckFailed(f"{what} is not right: {diagnosis}")
    raise CheckFailed(f"{what} is not right: {size_words(got, expected)}.")


def check_choice(got, expected, *, what: str, choices, hints: Mapping | None = None) -> None:
    """Pass if ``got`` is the ``expected`` one of ``choices`` (read by :func:`.sealed.as_option`); a wrong choice
    gets its hint if it has one."""
    got = as_option(got, choices)
    _records.publish("choice", what, got=got)
    if got not in choices:
        raise CheckFailed(f"{what}: answer with one of {', '.join(map(repr, choices))}, got {got!r:.60}")
    if got != expected:
        hint = (hints or {}).get(got, "think again about what each option means")
        raise CheckFailed(f"{what}: {got!r} is not right: {hint}")


def check_sealed(got, sealed: Sealed) -> None:
    """Pass if ``got`` matches a sealed answer (see :mod:`course_lib.checks.sealed`), else
    raise :class:`CheckFailed` naming the known mistake it matches, or with a hint.  The
    right value is not held anywhere the learner can read it."""
    if not isinstance(sealed, Sealed):
        raise TypeError(f"sealed must be a course_lib.checks.sealed.Sealed, got {type(sealed).__name__}")
    from dataclasses import asdict

    _records.publish("sealed", sealed.what, got=got, seal=asdict(sealed))
    verdict = _judge(sealed, got)
    if not verdict.ok:
        raise CheckFailed(verdict.message)


def check_close(got, expected, *, what: str, rtol: float = 1e-5, atol: float = 1e-8) -> None:
    """Pass if array-like ``got`` (numpy array, torch tensor, nested lists) has the shape of ``expected`` and
    every element is finite and within ``atol + rtol * |expected|``; else raise :class:`CheckFailed` saying
    only that (no shape, no value: it may be a hidden input's).  The recording primitive of arrays: a lesson's
    check compares and names mistakes with :func:`.exercise.compare`, which publishes through this."""
    from .exercise import as_tensor, close

    a = as_tensor(got, what)
    step = max(1, -(-a.numel() // _records.MAX_VALUES))
    _records.publish("close", what, got={"shape": list(a.shape), "values": a.reshape(-1)[::step].tolist()},
                     rtol=rtol, atol=atol)
    if not (close(a, expected, rtol=rtol, atol=atol) and bool(a.isfinite().all())):
        raise CheckFailed(f"{what} is not right")


def check_equal(got, expected, *, what: str) -> None:
    """Pass if ``got`` equals ``expected`` exactly, compared as plain data (tuples as lists,
    numpy/torch scalars as numbers: :func:`course_lib.checks.records.json_safe`), else raise
    :class:`CheckFailed` without showing ``expected``.  For answers with no tolerance: a list of
    (layer, head) pairs, a list of labels, a bool mask as nested lists.  Lesson checks call it
    once they have given their own, more specific diagnosis, so that the grader also compares
    the value outside the kernel."""
    _records.publish("equal", what, got=got)
    if _records.json_safe(got) != _records.json_safe(expected):
        raise CheckFailed(f"{what} is not right")


# --- the shape of an answer, and answers built on earlier ones -------------------------------

SIZE_HINTS = ("too large", "too small", "you returned 0", "its sign is wrong", "you answered 0",
              "less than 10 times off")
"""Phrases of the generic messages (:func:`check_value`'s size hint and a sealed answer's):
a failure that names no particular mistake."""


def as_tuple(result, n: int, what: str, names: str) -> tuple:
    """``result`` as a tuple of ``n`` values, else :class:`CheckFailed` saying what to return
    (``names``: the values in order, e.g. ``"total, active"``)."""
    if not isinstance(result, (tuple, list)) or len(result) != n:
        raise CheckFailed(f"{what}: return {n} numbers, ({names}), got {got_words(result, what)}")
    return tuple(result)


def as_keyed(result, keys, what: str) -> dict:
    """``result`` as a dict holding every key of ``keys``, else :class:`CheckFailed` naming the
    keys it needs."""
    if not isinstance(result, Mapping):
        raise CheckFailed(f"{what}: return a dict with keys {', '.join(map(repr, keys))}, "
                          f"got {got_words(result, what)}")
    missing = [k for k in keys if k not in result]
    if missing:
        raise CheckFailed(f"{what}: the dict is missing {', '.join(map(repr, missing))} "
                          f"(it needs {', '.join(map(repr, keys))})")
    return dict(result)


@contextmanager
def builds_on(*names: str):
    """Context manager (or decorator): when a check inside fails with a generic message
    (:data:`SIZE_HINTS`), add a pointer to the earlier exercises ``names`` the answer builds
    on: a wrong ``gpt2_params`` shows up again in every share built on it."""
    try:
        yield
    except CheckFailed as e:
        msg = str(e)
        if any(p in msg for p in SIZE_HINTS):
            msg += (f" If this uses your {' or '.join(names)}, make sure "
                    f"{'its test passes' if len(names) == 1 else 'their tests pass'} first.")
        raise CheckFailed(msg) from None


# --- naming a check's input in a message ------------------------------------------------------
# A message may name an input the notebook's visible test passes (the check's defaults): the
# learner can see it.  An input only a hidden test passes is described by its kind ("batched,
# with a causal mask"), never by its values: no shapes, sizes, seeds, positions, thresholds,
# card names or token counts.  These labels also serve as records' ``what=``, so they depend on
# the case only, never on the learner's answer (hidden cases may share a label: records of one
# label pair in order).

def is_shown(case, shown_cases) -> bool:
    """True if ``case`` equals one of ``shown_cases``, the inputs the visible test passes."""
    for c in shown_cases:
        try:
            if bool(case == c):
                return True
        except (TypeError, ValueError, RuntimeError):  # e.g. tensors: not comparable as one bool
            continue
    return False


def on_hidden(name: str, *kinds: str) -> str:
    """How a message names an input only a hidden test passes: what was called and what kind of
    input it was, e.g. ``on_hidden("attention", "batched", "with a causal mask")`` gives
    ``"attention on a hidden test's input (batched, with a causal mask)"``.  Empty kinds are
    left out."""
    kinds = [k for k in kinds if k]
    return f"{name} on a hidden test's input" + (f" ({', '.join(kinds)})" if kinds else "")


HIDDEN = on_hidden("")
"""The words that mark a hidden test's label (``" on a hidden test's input"``)."""
_TYPE_NAMES = frozenset({"Tensor", "Parameter", "ndarray", "float64", "float32", "float16", "int64", "int32",
                         "int16", "int8", "uint8", "bool_"})
"""numpy's and torch's types a message may name after a hidden test's label, beside the builtins."""


def got_words(x, what: str, width: int = 60) -> str:
    """A value the learner's code gave, as a message after ``what`` shows it: its type and the start of its
    repr (``"str '12'"``; ``width`` 0: the type alone).  After a hidden test's label (:data:`HIDDEN`), the type
    alone, named only if it is a builtin (``int``, ``ZeroDivisionError``), numpy's or torch's, else ``"another
    type"``: a value, or a class, the learner's code built from the hidden input would show it."""
    t = type(x)
    if HIDDEN in what:
        return t.__name__ if getattr(builtins, t.__name__, None) is t or t.__name__ in _TYPE_NAMES else "another type"
    return f"{t.__name__} {x!r:.{width}}" if width else t.__name__


def withheld(text: str) -> str:
    """``text`` (an error the learner's code raised on a hidden test's input) with its numbers
    replaced by ``…``: a shape mismatch would otherwise name the hidden sizes."""
    return re.sub(r"\d+(?:[_,.]\d+)*(?:[eE][+-]?\d+)?", "…", str(text))


@contextmanager
def watch_calls(found: list, files: Mapping[str, object] | None = None,
                codes: Mapping[object, str] | None = None, c_functions=()):
    """While the block runs, append to ``found`` a name for each call of a watched function:

    * ``files``: ``{file name in course_lib/: function names, or None for all}``, e.g.
      ``{"params.py": None, "shapes.py": {"kv_cache_width"}}``; named ``"params.count_params"``;
    * ``codes``: ``{code object: name}`` of particular Python functions;
    * ``c_functions``: names of C functions (torch's fused kernels), named ``"torch's NAME"``.

    Built on :func:`sys.setprofile` and chained with a profiler already set, so watches nest
    (a lesson's watch around :func:`own_work`'s).  Used to refuse an exercise's answer that
    calls the code that computes it."""
    watched = {os.path.join(_LIB_DIR, f): names for f, names in (files or {}).items()}
    codes = dict(codes or {})
    c_functions = frozenset(c_functions)
    previous = sys.getprofile()

    def profiler(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code in codes:
                found.append(codes[code])
            elif code.co_filename in watched and code.co_name != "<module>":  # not an import
                names = watched[code.co_filename]
                if names is None or code.co_name in names:
                    found.append(f"{os.path.basename(code.co_filename)[:-3]}.{code.co_name}")
        elif event == "c_call" and c_functions and getattr(arg, "__name__", None) in c_functions:
            found.append(f"torch's {arg.__name__}")
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profiler)
    try:
        yield
    finally:
        sys.setprofile(previous)


COUNTER_WORDS = ("{name} calls course_lib's own counter ({found}): build the count from the shape yourself, "
                 "then use course_lib to check it")


def own_work(fn: Callable, *args, refuse: Sequence[tuple[Callable, str]] = (), **kwargs):
    """Call ``fn(*args, **kwargs)`` and return its result: the learner's own work, or :class:`CheckFailed`
    if it called course_lib's counters (``params``, ``memory``, ``flops``: an exercise asks the learner to build
    the count, course_lib is there to check it afterwards) or anything one of ``refuse`` watches.  Each of
    ``refuse`` is ``(watch, words)``: ``watch(found)`` a context manager that appends a name to the list
    ``found`` for each refused call (:func:`watch_calls`, a torch mode), ``words`` the message, formatted with
    ``name`` (the function's) and ``found`` (the first name found), or a function of the two; the first
    watch that found one speaks, the counters first.  A refused call is named even if ``fn`` raised after
    it (the refused code's own error)."""
    if not callable(fn):
        raise CheckFailed(f"expected a function, got {type(fn).__name__}")
    refuse = ((partial(watch_calls, files=dict.fromkeys(COUNTER_MODULES)), COUNTER_WORDS), *refuse)
    found: list[list] = [[] for _ in refuse]
    try:
        with ExitStack() as stack:
            for (watch, _), names in zip(refuse, found):
                stack.enter_context(watch(names))
            result = fn(*args, **kwargs)
    except Exception:
        if not any(found):
            raise
    for (_, words), names in zip(refuse, found):
        if names:
            name = getattr(fn, "__name__", "your function")
            raise CheckFailed(words(name, names[0]) if callable(words) else words.format(name=name, found=names[0])) \
                from None
    return result


def heads_kind(n_heads: int, n_kv_heads: int) -> str:
    """An attention's heads in words, for a hidden test's label (:func:`on_hidden`): multi-head
    (a key/value head per query head), multi-query (one key/value head) or grouped-query."""
    if n_kv_heads == n_heads:
        return "multi-head attention (a key/value head per query head)"
    return ("multi-query attention (one key/value head)" if n_kv_heads == 1
            else "grouped-query attention")
