"""An exercise's check, declared: what is compared, on which inputs, which mistakes to name.

A lesson's checks module states each function exercise as an :class:`Exercise` of
:class:`Part` s, which the notebook's test cell calls (an exercise is its own check); the loop
over inputs, the labels (shown, made at run time, or hidden), :func:`call` (the learner's own
work), unpacking the result and publishing each record live here once.  Values go through
:func:`~course_lib.checks.check_value`, arrays through :func:`compare`; records keep the
format of :mod:`course_lib.checks.records`.

    check_gpt2_params = Exercise(
        "gpt2_params", Inputs(shown=[GPT2_SMALL], random=RANDOM_SHAPES,
                              hidden="another GPT-2-style shape"),
        reference=lambda a: {"total": count_params(shape(**a)).total},
        parts=[Part(expected="total", integer=True, mistakes=gpt2_mistakes)])

A message names a *shown* input (the visible test's, or one drawn at run time from a seeded generator,
labelled ``[random shape]``) by its values; a hidden test's only by its kind
(:func:`~course_lib.checks.on_hidden`).
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from . import (HIDDEN, CheckFailed, as_keyed, as_tuple, builds_on, check_close, check_equal, check_sealed,
               check_value, got_words, is_shown, on_hidden, own_work, watch_calls, withheld)
from .sealed import as_option

RANDOM_TAG = "[random shape] "
"""How a label marks an input made at run time."""



# --- labels ----------------------------------------------------------------------------------

def label(name: str, args: Mapping | str, *, shown: bool = True, random: bool = False,
          kinds: Sequence[str] = ("another input",)) -> str:
    """How a message names one call of the learner's function ``name``: with its arguments
    for a shown input (``gpt2_params(d_model=768, n_layers=12)``, ``args`` a mapping or the
    text inside the parentheses), marked :data:`RANDOM_TAG` if it was made at run time; for a
    hidden input only the function and ``kinds`` (``gpt2_params on a hidden test's input
    (another GPT-2-style shape)``).  Depends on the input alone: records use it as ``what``."""
    if not shown:
        return on_hidden(name, *kinds)
    text = args if isinstance(args, str) else ", ".join(f"{k}={v}" for k, v in args.items())
    return f"{RANDOM_TAG if random else ''}{name}({text})"


def part_label(label: str, index: int | str | None, name: str = "") -> str:
    """How a message names one part of a result: ``f(...)[1], the share`` or ``f(...)['norms']``
    after a shown input's label; after a hidden one (which ends in words) ``...: the share``
    or ``...: its 'norms'``.  ``index`` None: the whole result."""
    if index is None:
        return label
    if HIDDEN in label:
        return f"{label}: {name or f'its {index!r}'}"
    return f"{label}[{index!r}]" + (f", {name}" if name else "")


def merged(mistakes: Mapping[str, Any]) -> dict:
    """Mistakes that give the same wrong value on one input, named together (``"a; or b"``)."""
    by_value: dict = {}
    for diagnosis, wrong in mistakes.items():
        by_value.setdefault(wrong, []).append(diagnosis)
    return {"; or ".join(ds): wrong for wrong, ds in by_value.items()}


# --- the learner's own work --------------------------------------------------------------------

def call(fn: Callable, label: str, *args, shown: bool = True, shortcuts: Mapping | None = None,
         c_functions: Sequence[str] = (), explain_errors: bool = False,
         forbidden: Mapping[Callable, str] | None = None, advice: str = "",
         refuse: Sequence[tuple[Callable, str]] = (), **kwargs):
    """``fn(*args, **kwargs)``, the learner's own work (:func:`~course_lib.checks.own_work`), or
    :class:`CheckFailed` if it calls course_lib's counters, a shortcut that holds this answer (``shortcuts``:
    ``{file in course_lib/: function names or None}``; ``c_functions``: torch's fused kernels), one of the
    Python functions ``forbidden`` (``{function: its name}``: ``"fn calls NAME: advice"``) or what a watch of
    ``refuse`` sees; or if it raises on a hidden input (``shown=False``): one line naming the input by its kind
    (``label``) and the error with its numbers withheld (a shape would name the hidden sizes).  On a shown
    input the learner's own exception goes on as it is (the notebook shows their frames only), unless
    ``explain_errors`` asks for the one line there too.  CheckFailed and NotImplementedError (an answer not
    written yet) pass through unchanged."""
    codes = {inspect.unwrap(f).__code__: name for f, name in (forbidden or {}).items()}
    try:
        return own_work(fn, *args, refuse=(
            (partial(watch_calls, files=shortcuts or {}, c_functions=c_functions), _shortcut_words),
            *([(partial(watch_calls, codes=codes), f"{{name}} calls {{found}}: {advice}")] if codes else []),
            *refuse), **kwargs)
    except (CheckFailed, NotImplementedError):
        raise
    except Exception as e:  # noqa: BLE001 - the learner's code raised: say on which input
        if shown and not explain_errors:
            raise
        raise CheckFailed(f"{label} raised {got_words(e, label if shown else HIDDEN, 0)}: "
                          f"{e if shown else withheld(e)}") from None


def torch_watch(matches: Callable[[Any, tuple, dict], bool], *, dispatch: bool = False) -> Callable[[list], Any]:
    """A watch for :func:`call`'s ``refuse``: ``watch(found)`` appends to ``found`` each torch function called while
    it is on for which ``matches(func, args, kwargs)`` holds (``dispatch``: each operator at torch's dispatcher,
    however it is reached, a fused kernel's C++ path too)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Watch(TorchDispatchMode if dispatch else TorchFunctionMode):
        def __init__(self, found: list):
            super().__init__()
            self.found = found

        def seen(self, func, types, args=(), kwargs=None):
            if matches(func, args, kwargs or {}):
                self.found.append(str(func))
            return func(*args, **(kwargs or {}))
    setattr(Watch, "__torch_dispatch__" if dispatch else "__torch_function__", Watch.seen)
    return Watch


def _shortcut_words(name: str, found: str) -> str:
    where = found if found.startswith("torch's") else f"course_lib.{found}"
    return f"{name} calls {where}, which computes this answer: write it yourself, then compare with it"


def requires(name: str, check: Callable, *args, **kwargs) -> None:
    """Before a check whose input is the learner's earlier answer ``name``: run that answer's
    own ``check`` on the same input, and if it fails, blame it, not this step (``"your
    card_params is not right on this input: make its test pass first"``)."""
    try:
        check(*args, **kwargs)
    except CheckFailed:
        raise CheckFailed(f"your {name} is not right on this input: make its test pass first") \
            from None


@contextmanager
def blames(*earlier: tuple):
    """Around a check built on the learner's earlier answers, each ``(name, check, answer,
    *args)`` (``answer`` None: not given, skipped): if the block fails, with a wrong result or an
    error of the learner's own (a ZeroDivisionError from an earlier answer's 0), each earlier
    answer is re-checked first (:func:`requires`, ``check(answer, *args)``), so a wrong one is
    named as the cause.  A right one, or one not written yet (NotImplementedError), leaves the
    block's own failure; NotImplementedError from the block itself passes through."""
    try:
        yield
    except NotImplementedError:
        raise
    except Exception:  # noqa: BLE001 - a wrong result, or an error raised on an earlier answer's numbers
        with suppress(NotImplementedError):  # an earlier answer not written yet: the block's own words
            for name, check, answer, *args in earlier:
                if answer is not None:
                    requires(name, check, answer, *args)
        raise


def every(*checks: Callable[[], None]) -> None:
    """Run every one of ``checks`` (each a call of a check with no arguments left); if any fail,
    one :class:`CheckFailed` holding each failure's message in order (``"A. Also, B."``; a lone
    failure's message as it is), so an answer with two parts wrong hears of both at once.  Each
    check publishes its records as it would alone: the grader sees every part."""
    failed = []
    for check in checks:
        try:
            check()
        except CheckFailed as e:
            failed.append(str(e))
    if len(failed) == 1:
        raise CheckFailed(failed[0])
    if failed:
        raise CheckFailed(". Also, ".join(m.rstrip(".") for m in failed) + ".")


# --- arrays ------------------------------------------------------------------------------------

def as_tensor(x, what: str, *, dtype=None):
    """``x`` (a tensor, numpy array, nested list or number) as a float64 (or ``dtype``) torch
    tensor detached on the CPU, else :class:`CheckFailed` naming the type it got."""
    import torch

    dtype = dtype or torch.float64
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().to(dtype)
    try:
        return torch.as_tensor(x, dtype=dtype)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailed(f"{what}: expected a tensor, got {got_words(x, what)}") \
            from None


def close(a, b, *, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Same shape and every element within ``atol + rtol·|b|`` (NaN equal to NaN), in float64."""
    import torch

    a, b = as_tensor(a, "a"), as_tensor(b, "b")
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def compare(got, expected, *, what: str, shown: bool = True, rtol: float = 1e-4,
            atol: float = 1e-5, mistakes: Mapping[str, Any] | Callable[[], Mapping] | None = None,
            shape_words: str = "", record: tuple[float, float] | None = None, tensor: bool = False,
            otherwise: Callable[[Any, Any], str | None] | None = None, publish: bool = True) -> None:
    """Compare array ``got`` with ``expected`` and publish the grader's record, in one pass: the one
    comparison of arrays, so a hidden input's shape or values never show.

    Fails (:class:`CheckFailed`) on: a value that is not an array (``tensor``: not a torch tensor);
    a wrong shape (``shape_words``, e.g. ``"the shape of x"``, says what it should be; the shapes
    themselves are named only on a ``shown`` input); a match with some of ``mistakes``
    (``{diagnosis: the array that mistake gives}``, or a function giving them, called only on a
    wrong answer; ``None`` skipped, a mistake equal to ``expected`` ignored; every match named);
    else the words ``otherwise(got, expected)`` (both float64) give after ``what``, if any; else NaN
    or infinite values, or the largest difference.  Passing publishes a ``close`` record with
    tolerance ``record`` = ``(rtol, atol)``, by default twice this comparison's (the grader compares
    with the model answer's values, which lie within the tolerance of ``expected`` too); ``publish``
    False: nothing (a check of several arrays that records them once all are right)."""
    import torch

    if tensor and not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what}: expected a torch tensor, got {got_words(got, what if shown else HIDDEN, 0)}")
    g, e = as_tensor(got, what), as_tensor(expected, "expected")
    if g.shape != e.shape:
        raise CheckFailed(f"{what}: expected shape {tuple(e.shape)}" + (f" ({shape_words})" if shape_words else "")
                          + f", got {tuple(g.shape)}" if shown else
                          f"{what}: expected {shape_words or 'another shape'}, got a different one")
    if close(g, e, rtol=rtol, atol=atol) and bool(torch.isfinite(g).all()):
        r = record or (2 * rtol, 2 * atol)
        if publish:
            check_close(g, e, what=what, rtol=r[0], atol=r[1])
        return
    mistakes = (mistakes() if callable(mistakes) else mistakes) or {}
    if found := [d for d, wrong in mistakes.items() if wrong is not None
                 and not close(wrong, e, rtol=rtol, atol=atol) and close(g, wrong, rtol=rtol, atol=atol)]:
        raise CheckFailed(f"{what} is not right: {'; or '.join(found)}")
    if words := otherwise and otherwise(g, e):
        raise CheckFailed(f"{what} {words}")
    if g.numel() and not bool(torch.isfinite(g).all()):
        raise CheckFailed(f"{what} is not right: it holds NaN or infinite values")
    raise CheckFailed(f"{what} is not right: it differs from the reference by up to "
                      f"{float((g - e).abs().max()):.2g}")


# --- declared exercises ------------------------------------------------------------------------

@dataclass(frozen=True)
class Inputs:
    """The inputs an exercise is tried on: ``shown`` (the visible test's, named in messages),
    ``random`` (made at run time and seeded; shown, tagged :data:`RANDOM_TAG`) and, for any
    other (a hidden test's), the words ``hidden`` that describe its kind."""
    shown: Sequence[Mapping] = ()
    random: Sequence[Mapping] = ()
    hidden: str = "another input"
    kinds: Callable[[Mapping], Sequence[str]] | None = None
    """Optional: the words describing a hidden input's kind, as a function of the input
    (default: ``(hidden,)``)."""
    text: Callable[[Mapping], str] | None = None
    """Optional: how a shown input's arguments are written (default ``d_model=768, ...``)."""

    @property
    def visible(self) -> tuple:
        return (*self.shown, *self.random)

    def label(self, name: str, args: Mapping) -> str:
        return label(name, self.text(args) if self.text else args, shown=is_shown(args, self.visible),
                     random=is_shown(args, self.random), kinds=self.kinds(args) if self.kinds else (self.hidden,))


@dataclass(frozen=True)
class Part:
    """One value of a learner's result, checked with :func:`check_value`.

    Attributes:
        index: where it is in the result (a tuple position or a dict key); None for the
            whole result.
        name: how a message names it (``"the embedding share"``).
        expected: the key of the reference's dict holding the right value, or a function of
            that dict.
        mistakes: a function of the reference's dict giving ``{diagnosis: wrong value}``.
        rel, integer: the tolerance (0: exact) and whether it must be a whole number.
        builds_on: earlier exercises it builds on (named on a generic failure).
    """
    index: int | str | None = None
    name: str = ""
    expected: str | Callable[[dict], Any] = "value"
    mistakes: Callable[[dict], Mapping] | None = None
    rel: float = 0.0
    integer: bool = False
    builds_on: tuple[str, ...] = ()
    suffix: str = ""
    """Optional: how a message names this part after the call's label on any input, shown or
    hidden (``"[0], the ridge point"``); default: :func:`part_label`'s."""


class Check:
    """A declared check: a lesson module's ``check_*`` object that the notebook calls
    (:func:`~course_lib.tutor.announce` gives it one-line messages)."""


@dataclass(frozen=True)
class Question(Check):
    """A question whose answers are sealed (test yourself, a recap row): ``check(a, b)``
    compares each argument with the sealed answer of the same position (``answers``, from
    :func:`~course_lib.checks.sealed.load`), with ``builds_on`` named on a generic failure."""
    answers: Sequence
    builds_on: tuple[str, ...] = ()
    options: Mapping[int, Sequence[str]] | None = None
    """Optional: the options of choice answers, by position, as the notebook writes them; such
    an answer is read in them (:func:`read_choice`) and compared outside ``builds_on``."""
    all_parts: bool = False
    """Whether a failure names every wrong answer (:func:`every`) rather than the first."""

    def __call__(self, *got) -> None:
        if len(got) != len(self.answers):
            raise TypeError(f"expected {len(self.answers)} answers, got {len(got)}")
        options = self.options or {}

        def one(i, value, sealed):
            with builds_on(*self.builds_on) if self.builds_on and i not in options else nullcontext():
                check_sealed(read_choice(value, sealed.what, options[i]) if i in options else value,
                             sealed)
        parts = [partial(one, i, value, sealed) for i, (value, sealed) in enumerate(zip(got, self.answers))]
        if self.all_parts:
            every(*parts)
        else:
            for part in parts:
                part()


@dataclass(frozen=True)
class Exercise(Check):
    """A function exercise: the learner's ``name``, tried on ``inputs``, each result compared
    part by part with ``reference(args)`` (a dict; the args are merged in, for the parts'
    mistakes).  ``returns`` says how to read the result: ``None`` (one value), a text naming
    the tuple's values in order (``"total, active"``), or a tuple of dict keys.  ``shortcuts``
    and ``c_functions``: see :func:`call`."""
    name: str
    inputs: Inputs
    reference: Callable[[Mapping], Mapping]
    parts: Sequence[Part]
    returns: str | tuple[str, ...] | None = None
    builds_on: tuple[str, ...] = ()
    arg: str | None = None
    """The argument's name when a case is given as a bare value (``d_models=[64, 1024]``)."""
    shortcuts: Mapping | None = None
    c_functions: Sequence[str] = ()
    fixed_note: bool = True
    """Whether a failure on a random input, after the shown one passed, asks whether the
    answer holds a fixed value (False: the message alone)."""
    positional: bool = False
    """Whether ``fn`` gets a case's values positionally, in the case's order (so its
    parameters may have any names), rather than as keywords."""
    explain_errors: bool = False
    """Whether an error ``fn`` raises on a shown input is one line naming it too (:func:`call`)."""

    def unpack(self, result, label: str):
        if self.returns is None:
            return result
        if isinstance(self.returns, str):
            return as_tuple(result, len(self.parts), label, self.returns)
        return as_keyed(result, self.returns, label)

    def __call__(self, fn, cases: Sequence | None = None, **named) -> None:
        """Try ``fn`` on each case (default: the visible inputs; a hidden test passes its own,
        positionally or under any one keyword, e.g. ``shapes=[...]``); raise
        :class:`CheckFailed` with the first mistake found."""
        if named:
            (cases,) = named.values()
        fixed_passed = False  # an answer right on the shown input but not on a run-time one
        with builds_on(*self.builds_on) if self.builds_on else nullcontext():
            for args in (self.inputs.visible if cases is None else cases):
                args = args if isinstance(args, Mapping) else {self.arg: args}
                try:
                    self.check_one(fn, args)
                except CheckFailed as e:
                    if fixed_passed and self.fixed_note and is_shown(args, self.inputs.random):
                        raise CheckFailed(f"{e} (It was right on the input the notebook shows: "
                                          "does it use its arguments, or hold a fixed answer?)") \
                            from None
                    raise
                fixed_passed |= is_shown(args, self.inputs.shown)

    def check_one(self, fn, args: Mapping) -> None:
        label = self.inputs.label(self.name, args)
        shown, positional = HIDDEN not in label, self.positional
        result = self.unpack(call(fn, label, *(args.values() if positional else ()), shown=shown,
                                  shortcuts=self.shortcuts, c_functions=self.c_functions,
                                  explain_errors=self.explain_errors, **({} if positional else args)), label)
        ref = {**args, **self.reference(args)}
        for part in self.parts:
            got = result if part.index is None else result[part.index]
            want = ref[part.expected] if isinstance(part.expected, str) else part.expected(ref)
            what = label + part.suffix if part.suffix else part_label(label, part.index, part.name)
            mistakes = part.mistakes(ref) if part.mistakes else None
            with builds_on(*part.builds_on) if part.builds_on else nullcontext():
                check_value(got, want, what=what, rel=part.rel, integer=part.integer, mistakes=mistakes)


# --- shared words and names for lessons' checks ------------------------------------------------

def dtype_name(bytes_per_number) -> str:
    """The dtype course_lib's counters take for ``bytes_per_number`` (4: ``"fp32"``, 2:
    ``"bf16"``, 1: ``"int8"``, 0.5: ``"int4"``, from :data:`course_lib.units.DTYPE_BYTES`);
    ValueError for another number."""
    from ..units import DTYPE_BYTES

    names = {size: name for name, size in reversed(DTYPE_BYTES.items())}  # the first name of a size
    if bytes_per_number not in names:
        raise ValueError(f"bytes_per_number={bytes_per_number!r} is not one of {sorted(names)}")
    return names[bytes_per_number]


def read_choice(x, what: str, options: Sequence):
    """The one of ``options`` that ``x`` is (:func:`~.sealed.as_option`: ``" Keys_and  values"`` is ``"keys and
    values"``), else :class:`CheckFailed` naming the options."""
    if (found := as_option(x, options)) not in options:
        raise CheckFailed(f"{what}: answer with one of {', '.join(map(repr, options))}, "
                          f"got {repr(x)[:60] if HIDDEN not in what else got_words(x, what)}")
    return found


# --- one try on a generated input, and answers with no tolerance (added with lesson 2) ---------
# For checks whose inputs are made from a case (tensors drawn from a seed) rather than passed as
# the learner's keyword arguments, so that an Exercise does not fit.

def attempt(fn: Callable, name: str, case, cases: tuple[Sequence, Sequence], text: Mapping | str,
            args: Sequence = (), kwargs: Mapping | None = None, *, kinds: Sequence[str] = (),
            shown: bool = True, **options) -> tuple[str, bool, Any]:
    """One :func:`call` of the learner's ``fn(*args, **kwargs)`` on ``case``, as ``(label,
    shown, result)``: a case among the visible test's ``cases`` (fixed, made at run time) is
    named ``name(text)`` while ``shown`` (:func:`label`), any other by its ``kinds`` only;
    ``options`` go to :func:`call` (``shortcuts``, ``c_functions``, ``explain_errors``,
    ``forbidden``, ``advice``)."""
    fixed, made = cases
    shown = shown and is_shown(case, (*fixed, *made))
    what = label(name, text, shown=shown, random=is_shown(case, made), kinds=kinds)
    return what, shown, call(fn, what, *args, shown=shown, **options, **(kwargs or {}))


def sealed_picks(picked, sealed: Mapping[str, Any]) -> tuple[list, list]:
    """A question answered by picking items (a set of letters or names), each item's sealed "yes" (pick it)
    or "no": every item is checked (:func:`~course_lib.checks.check_sealed`, a record each), and the wrong
    ones returned, in order, as ``(picked but not to be, to be picked but not)`` for one diagnosis."""
    wrong = []
    for item, seal in sealed.items():
        try:
            check_sealed("yes" if item in picked else "no", seal)
        except CheckFailed:
            wrong.append(item)
    return [i for i in wrong if i in picked], [i for i in wrong if i not in picked]


def name_mistake(what: str, mistakes: Mapping[str, Any] | None, sep: str = " is not right: ") -> None:
    """:class:`CheckFailed` ``what + sep + diagnosis`` for the first of ``mistakes``
    (``{diagnosis: whether the answer matches that mistake}``) that matches; else nothing.  A
    callable condition is called only when reached (so it may rely on the earlier ones being
    false)."""
    diagnosis = next((d for d, matches in (mistakes or {}).items()
                      if (matches() if callable(matches) else matches)), None)
    if diagnosis:
        raise CheckFailed(f"{what}{sep}{diagnosis}")


def exactly(got, expected, what: str, mistakes: Mapping[str, bool] | None = None,
            sep: str = " is not right: ") -> bool:
    """An answer with no tolerance (a list of labels, a bool mask as lists): True, and
    :func:`~course_lib.checks.check_equal`'s record, if ``got == expected``; else
    :func:`name_mistake`, or False if no mistake matches (the caller says what is wrong)."""
    if got == expected:
        check_equal(got, expected, what=what)
        return True
    name_mistake(what, mistakes, sep)
    return False
