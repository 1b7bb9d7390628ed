"""Sealed answers: a check that says right or wrong without holding the right value.

A test-yourself answer is checked in the notebook, so whatever it is compared with is on the learner's
disk.  A :class:`Sealed` answer keeps only salted, slow hashes (PBKDF2) of the *canonical forms* that count
as right, and of those known mistakes give (each with its hint): a check hashes the answer the same way
and can name the mistake without the value appearing in the notebook, in course_lib or in a message.

Numbers.  The canonical form at ``digits`` significant figures is ``format(x, ".{digits-1}e")``
(``3.14159`` at 4 is ``"3.142e+00"``).  Sealing ``v`` with relative tolerance ``rel`` picks the fewest
figures whose rounding step is at most ``rel·|v|/2`` and stores every form a number within ``rel·|v|`` of
``v`` rounds to: every answer within the tolerance passes, none more than 1.5 times the tolerance away
does.  Mistakes are sealed with the same figures; a right answer is never called a mistake.  ``rel=0``
seals an exact whole number.  Choices: the option stripped, lower-cased, ``_`` and spaces read as ``-``.

Sealing keeps a value from being *read*; it is not encryption: hashing candidates one by one (about 0.05
s each) finds a value of few figures in minutes, and course_lib's counters compute most answers anyway.
The only plain facts stored are a number's power of ten (``decade``) and sign.

Size words.  A number's *size bin* is ``floor(log10|x| / BIN_WIDTH)`` (bins a factor of 1.047 wide); a
sealed number keeps its bin's hash (``size``, :data:`BIN_ITERATIONS` rounds), so a check finds how many
bins a wrong answer lies from it by hashing the bins its power of ten allows (within three powers of ten)
and says only what that proves ("too large by a factor between 1.9 and 2.1", "too small by between 5% and
14%"), no more than one try at the check tells; beyond that, the powers of ten only.

Sealed answers are data: ``sealed_answers/<assignment>.json``, keyed by salt, read with :func:`load` and
written by the author's ``python -m course_tools.seal``; the learner's copy only reads and judges them.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import math
import numbers
from dataclasses import dataclass, field

ITERATIONS = 60_000
"""PBKDF2 rounds per hash: slow enough to make guessing tedious, fast enough for a check."""

_HEX = 16
"""Hex digits kept of each hash (64 bits: collisions are not a concern at this scale)."""

BIN_WIDTH = 0.02
"""Width of a size bin, in powers of ten (a factor of 1.047)."""
BIN_ITERATIONS = 1_000
"""PBKDF2 rounds of a size bin's hash (a check may hash a hundred bins)."""
_BIN_DECADES = 3
"""How many powers of ten apart a check still looks for the bin."""


@dataclass(frozen=True)
class Sealed:
    """One sealed answer.

    Attributes:
        what: the answer's name as the learner sees it, e.g. ``"tys1_params"``.
        salt: unique per answer, e.g. ``"lessonN/tys1_params"``.
        kind: ``"number"`` or ``"choice"``.
        digits: significant figures of the canonical form (``None``: exact whole number,
            or a choice).
        right: hashes of the canonical forms that count as right.
        mistakes: ``((hint, hashes), ...)`` in order: the first whose hashes hold the
            answer's hash names the mistake.
        hint: said when an answer matches neither the right forms nor a known mistake.
        choices: the allowed options of a choice (public).
        decade: ``floor(log10(|value|))`` of a number (for size hints), or ``None``.
        sign: ``1``, ``-1`` or ``0``: the sign of a number.
        size: the hash of a nonzero number's size bin (see the module docstring), or ``None``.
    """
    what: str
    salt: str
    kind: str
    digits: int | None
    right: tuple[str, ...]
    mistakes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    hint: str = ""
    choices: tuple[str, ...] = ()
    decade: int | None = None
    sign: int = 1
    size: str | None = None

    def __post_init__(self):
        if self.kind not in ("number", "choice"):
            raise ValueError(f"kind must be 'number' or 'choice', got {self.kind!r}")
        if not self.right:
            raise ValueError(f"{self.what}: a sealed answer needs at least one right form")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"{self.what}: a sealed choice needs its choices")

    @classmethod
    def from_data(cls, data: dict) -> "Sealed":
        """A sealed answer from its JSON form (lists read back as tuples); ValueError or
        TypeError for a malformed one."""
        def tup(v):
            return tuple(tup(x) for x in v) if isinstance(v, list) else v
        return cls(**{k: tup(v) for k, v in data.items()})


def normalize_choice(x) -> str:
    """A choice's canonical form, the one way an answer is read as an option: stripped, lower-case, each run
    of ``_`` and spaces read as one ``-`` (``" Keys_and  values"`` is ``"keys-and-values"``); not a str: as it is."""
    return "-".join(x.strip().lower().replace("_", " ").split()) if isinstance(x, str) else x


def as_option(x, options):
    """The one of ``options`` that ``x`` is, both read by :func:`normalize_choice`; else ``x`` as it is."""
    return next((o for o in options if normalize_choice(o) == normalize_choice(x)), x)


def is_number(x) -> bool:
    """A real number (Python, numpy or torch scalar), not a bool."""
    return (isinstance(x, numbers.Real) and not isinstance(x, bool)) or (
        hasattr(x, "item") and getattr(x, "ndim", 1) == 0 and not isinstance(x, bool))


def as_number(x, what: str, whole: bool = False):
    """``x`` (a Python, numpy or torch real scalar) as a Python number, else ValueError with the words a learner
    reads: not a number (a bool is not), not finite, or (``whole``) not a whole number; after a hidden test's
    label ``what``, without the value (:func:`~course_lib.checks.got_words`)."""
    from . import HIDDEN, got_words

    if not is_number(x):
        raise ValueError(f"{what}: expected a number, got {got_words(x, what)}")
    x = x.item() if hasattr(x, "item") else x
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"{what}: got {x}, which is not a finite number")
    if whole and not float(x).is_integer():
        raise ValueError(f"{what}: expected a whole number, got {'a fraction' if HIDDEN in what else repr(x)}")
    return x


def canonical(x, digits: int | None) -> str:
    """The canonical text of number ``x``: ``digits`` significant figures in ``e`` notation,
    or, with ``digits=None``, the exact whole number (``"1024"``).

    Raises ValueError for a non-finite number, or a non-whole one with ``digits=None``."""
    x = x.item() if hasattr(x, "item") else x
    xf = float(x)
    if not math.isfinite(xf):
        raise ValueError(f"not a finite number: {x!r}")
    if digits is None:
        if isinstance(x, int):
            return str(x)
        if not xf.is_integer():
            raise ValueError(f"not a whole number: {x!r}")
        return str(int(xf))
    text = format(xf, f".{digits - 1}e")
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def digest(salt: str, form: str) -> str:
    """The hash of one canonical form (PBKDF2-SHA256, :data:`ITERATIONS` rounds, salted)."""
    raw = hashlib.pbkdf2_hmac("sha256", form.encode(), ("course-sealed:" + salt).encode(),
                              ITERATIONS)
    return raw.hex()[:_HEX]


def _decade(v: float) -> int:
    return math.floor(math.log10(abs(v))) if v else 0


def size_bin(v: float) -> int:
    """The size bin of nonzero ``v``: ``floor(log10|v| / BIN_WIDTH)``."""
    return math.floor(math.log10(abs(v)) / BIN_WIDTH)


def bin_digest(salt: str, b: int) -> str:
    """The hash of size bin ``b`` (PBKDF2-SHA256, :data:`BIN_ITERATIONS` rounds, salted)."""
    raw = hashlib.pbkdf2_hmac("sha256", str(b).encode(), ("course-sealed-bin:" + salt).encode(),
                              BIN_ITERATIONS)
    return raw.hex()[:_HEX]


@dataclass
class Verdict:
    """What a sealed answer says about one answer: ``ok`` and, if not, the ``message``."""
    ok: bool
    message: str = ""
    mistake: str | None = None
    form: str | None = field(default=None, repr=False)


def judge(sealed: Sealed, got) -> Verdict:
    """Compare ``got`` with a sealed answer (no exception: see :class:`Verdict`)."""
    what = sealed.what
    if sealed.kind == "choice":
        form = normalize_choice(got)
        if form not in sealed.choices:
            return Verdict(False, f"{what}: answer with one of "
                                  f"{', '.join(map(repr, sealed.choices))}, got {got!r:.60}")
        lead = f"{what}: {got!r:.60} is not right: "  # the answer as the learner wrote it, not its form
    else:
        try:
            form = canonical(as_number(got, what, whole=sealed.digits is None), sealed.digits)
        except ValueError as e:
            return Verdict(False, str(e))
        lead = f"{what} is not right: "
    h = digest(sealed.salt, form)
    if h in sealed.right:
        return Verdict(True, form=form)
    for text, hashes in sealed.mistakes:
        if h in hashes:
            return Verdict(False, lead + text, text, form)
    if sealed.kind == "choice":
        return Verdict(False, lead + (sealed.hint or "think again about what each option means"), form=form)
    hint = _size_hint(sealed, float(form))
    return Verdict(False, f"{lead}{hint}{'' if hint.endswith(('.', '?', '!')) else '.'}", form=form)


def _size_hint(sealed: Sealed, x: float) -> str:
    hint = sealed.hint
    if sealed.decade is None:
        return hint or "think again"
    if x == 0:
        return "you answered 0" + (f"; {hint}" if hint else "")
    if (sealed.sign and (x > 0) != (sealed.sign > 0)) or (not sealed.sign and x < 0):
        return "its sign is wrong"
    if not sealed.sign:  # the answer is 0: no power of ten to compare with
        return hint or "think again"
    k = _decade(x) - sealed.decade
    apart = _bins_apart(sealed, x, k)
    if apart is not None:
        return _bin_words(apart) + (f"; {hint}" if hint else "")
    # Only the answer's power of ten is known, so the words say no more than it proves: a
    # decade apart is between 1 and 100 times off, two decades between 10 and 1,000 ...
    if k:
        side = "too large" if k > 0 else "too small"
        k = abs(k)
        words = ("by less than a factor of 100" if k == 1 else
                 f"by a factor between {10 ** (k - 1):,} and {10 ** (k + 1):,}")
        return f"it is {side} {words}" + (f"; {hint}" if hint else "")
    return hint or "it is not within the tolerance (it is less than 10 times off)"


def _bins_apart(sealed: Sealed, x: float, k: int) -> int | None:
    """How many size bins ``x`` lies above the sealed number (negative: below), found by
    hashing the bins ``k`` powers of ten apart allow; ``None`` without a size hash or beyond
    :data:`_BIN_DECADES`."""
    if not sealed.size or abs(k) > _BIN_DECADES:
        return None
    bx, per = size_bin(x), 1 / BIN_WIDTH
    # log10 x - log10 v lies in (k - 1, k + 1), so the bins differ by about that much
    near = sorted(range(math.floor((k - 1) * per) - 1, math.ceil((k + 1) * per) + 2),
                  key=lambda d: abs(d - k * per))
    return next((d for d in near if bin_digest(sealed.salt, bx - d) == sealed.size), None)


def _bin_words(d: int) -> str:
    """What ``d`` bins apart proves: log10(got / right) lies in ``((d - 1)·w, (d + 1)·w)``."""
    if d == 0:
        return f"it is less than {math.ceil(100 * (10 ** BIN_WIDTH - 1))}% off, but not within the tolerance"
    side = "too large" if d > 0 else "too small"
    lo, hi = 10 ** ((abs(d) - 1) * BIN_WIDTH), 10 ** ((abs(d) + 1) * BIN_WIDTH)
    if hi <= 1.25:  # a few percent: of the answer, as size_words says a shortfall
        a, b = (lo - 1, hi - 1) if d > 0 else (1 - 1 / lo, 1 - 1 / hi)
        a, b = math.floor(100 * a), math.ceil(100 * b)
        return f"it is {side} by less than {b}%" if a == 0 else f"it is {side} by between {a}% and {b}%"
    from . import about

    words = about(math.sqrt(lo * hi))
    k = float(words.rsplit(" ", 1)[1].replace(",", ""))
    if k / 1.16 <= lo and hi <= 1.16 * k:  # true wherever in the bins the ratio lies
        return f"it is {side} {words}"
    return f"it is {side} by a factor between {_rounded(lo, False)} and {_rounded(hi, True)}"


def _rounded(x: float, up: bool) -> str:
    """``x`` rounded up or down to two significant figures, written with commas."""
    p = 10 ** (math.floor(math.log10(x)) - 1)
    return f"{(math.ceil if up else math.floor)(x / p) * p:,.{max(0, -round(math.log10(p)))}f}"


SEALED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sealed_answers")
"""Where each assignment's sealed answers are stored: ``<assignment>.json``, ``{salt: fields}``."""


def _path(assignment: str) -> str:
    if not assignment.replace("_", "").isalnum():
        raise ValueError(f"not an assignment name: {assignment!r}")
    return os.path.join(SEALED_DIR, f"{assignment}.json")


@functools.cache
def load(assignment: str) -> dict[str, Sealed]:
    """``{salt: Sealed}`` of ``assignment`` (``"lesson1"``), read from :data:`SEALED_DIR`.

    Raises ValueError naming the file and entry if one is malformed."""
    path = _path(assignment)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = {}
    for salt, fields in data.items():
        try:
            sealed = Sealed.from_data(fields)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: sealed answer {salt!r} is malformed: {e}") from None
        if sealed.salt != salt:
            raise ValueError(f"{path}: entry {salt!r} holds the salt {sealed.salt!r}")
        out[salt] = sealed
    return out
