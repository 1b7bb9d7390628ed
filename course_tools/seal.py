"""The seal command: seal a test-yourself answer into its assignment's sealed answers.

An author's tool, not the learner's: course_lib keeps only what a check needs to judge an answer
(:mod:`course_lib.checks.sealed`, whose docstring says what a seal holds and proves); this module
makes the seals and writes them into ``course_lib/checks/sealed_answers/<assignment>.json`` (the
salt's first part names the assignment).  Never commit the plain value::

    python -m course_tools.seal number 42.5 --what q_answer_millions \\
        --salt lessonN/q_answer_millions --rel 0.005 \\
        --mistake "that counts the bias twice=43.1"
    python -m course_tools.seal choice keys --choices queries,keys,values \\
        --what tys_cached --salt lessonN/tys_cached --mistake "queries=only the new token's query is used"

writes (or replaces) the entry of salt ``lessonN/q_answer_millions``; the checks module reads it
as ``SEALED["lessonN/q_answer_millions"]`` (:func:`course_lib.checks.sealed.load`) and checks an
answer with :func:`course_lib.checks.check_sealed`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict

from course_lib.checks import sealed as _sealed
from course_lib.checks.sealed import (Sealed, _decade, bin_digest, canonical, digest, is_number,
                                      normalize_choice, size_bin)


def _digits_for(value: float, rel: float) -> int:
    """Fewest significant figures whose rounding step is at most ``rel * |value| / 2``
    everywhere in ``[value - rel·|value|, value + rel·|value|]`` (the step is largest at the
    largest magnitude, also where that magnitude rounds up to the next power of ten)."""
    top = abs(value) * (1 + rel)
    digits = max(1, math.ceil(_decade(top) + 1 - math.log10(rel * abs(value) / 2) - 1e-12))
    # Just below a power of ten, the top may round up into the next decade, whose step at these
    # figures is ten times coarser: one more figure keeps the step small there too.
    if abs(float(canonical(top, digits))) >= 10.0 ** (_decade(top) + 1):
        digits += 1
    return digits


def accepted_forms(value: float, rel: float, digits: int | None) -> list[str]:
    """Every canonical form a number within ``rel`` of ``value`` rounds to (sorted)."""
    if digits is None:
        return [canonical(value, None)]
    lo, hi = value - rel * abs(value), value + rel * abs(value)
    # the finest step in the interval is at its smallest magnitude
    small = min(abs(lo), abs(hi)) if lo * hi > 0 else 0.0
    step = 10.0 ** ((_decade(small) if small else _decade(value) - 3) - digits + 1) / 4
    n = min(int((hi - lo) / step) + 2, 200_000)
    forms = {canonical(lo + (hi - lo) * i / n, digits) for i in range(n + 1)}
    return sorted(forms)


def seal_number(what: str, value, *, salt: str, rel: float, mistakes=None,
                hint: str = "") -> Sealed:
    """Seal number ``value``: right within relative tolerance ``rel`` (``0``: an exact whole
    number).  ``mistakes`` is ``{hint: wrong value}`` (sealed with the same figures and
    tolerance; a mistake within tolerance of ``value`` is dropped)."""
    if not is_number(value):
        raise ValueError(f"{what}: value must be a number, got {value!r}")
    value = float(value.item() if hasattr(value, "item") else value)
    if rel < 0 or not math.isfinite(rel):
        raise ValueError(f"{what}: rel must be a finite number >= 0, got {rel!r}")
    if rel == 0 and not value.is_integer():
        raise ValueError(f"{what}: rel=0 seals whole numbers only; give a tolerance for {value!r}")
    if rel > 0 and value == 0:
        raise ValueError(f"{what}: a relative tolerance cannot seal 0 (seal it with rel=0)")
    digits = None if rel == 0 else _digits_for(value, rel)
    right = accepted_forms(value, rel, digits)
    sealed_mistakes = []
    for text, wrong in (mistakes or {}).items():
        wrong = float(wrong)
        if wrong == value or (rel and abs(wrong - value) <= rel * abs(value)):
            continue
        if digits is None and not wrong.is_integer():
            continue  # an exact whole answer cannot equal a fraction
        forms = [f for f in accepted_forms(wrong, rel, digits) if f not in right]
        sealed_mistakes.append((text, tuple(sorted(digest(salt, f) for f in forms))))
    return Sealed(what=what, salt=salt, kind="number", digits=digits,
                  right=tuple(sorted(digest(salt, f) for f in right)),
                  mistakes=tuple(sealed_mistakes), hint=hint, decade=_decade(value),
                  sign=(value > 0) - (value < 0),
                  size=bin_digest(salt, size_bin(value)) if value else None)


def seal_choice(what: str, answer: str, *, salt: str, choices, hints=None,
                hint: str = "") -> Sealed:
    """Seal the right option ``answer`` of ``choices``; ``hints`` is ``{wrong option: hint}``."""
    options = tuple(normalize_choice(c) for c in choices)
    answer = normalize_choice(answer)
    if answer not in options:
        raise ValueError(f"{what}: {answer!r} is not one of {options}")
    sealed_mistakes = tuple((text, (digest(salt, normalize_choice(option)),))
                            for option, text in (hints or {}).items()
                            if normalize_choice(option) != answer)
    return Sealed(what=what, salt=salt, kind="choice", digits=None,
                  right=(digest(salt, answer),), mistakes=sealed_mistakes, hint=hint,
                  choices=options, decade=None, sign=0)




def store(sealed: Sealed) -> str:
    """Write ``sealed`` into its assignment's file (the salt's first part before ``/``),
    replacing an entry of the same salt, keys kept in order; returns the file's path."""
    path = _sealed._path(sealed.salt.split("/", 1)[0])
    data = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    data[sealed.salt] = json.loads(json.dumps(asdict(sealed)))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    _sealed.load.cache_clear()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.seal",
                                     description="Seal an answer into sealed_answers/<assignment>.json.")
    sub = parser.add_subparsers(dest="kind", required=True)
    num = sub.add_parser("number", help="seal a number")
    num.add_argument("value", type=float)
    num.add_argument("--rel", type=float, required=True, help="relative tolerance (0: exact)")
    num.add_argument("--mistake", action="append", default=[], metavar="HINT=VALUE")
    ch = sub.add_parser("choice", help="seal a choice")
    ch.add_argument("answer")
    ch.add_argument("--choices", required=True, help="comma-separated options")
    ch.add_argument("--mistake", action="append", default=[], metavar="OPTION=HINT")
    for p in (num, ch):
        p.add_argument("--what", required=True)
        p.add_argument("--salt", required=True)
        p.add_argument("--hint", default="")
    args = parser.parse_args(argv)
    pairs = [m.rsplit("=", 1) if args.kind == "number" else m.split("=", 1) for m in args.mistake]
    if any(len(p) != 2 for p in pairs):
        parser.error("--mistake takes HINT=VALUE (number) or OPTION=HINT (choice)")
    if args.kind == "number":
        sealed = seal_number(args.what, args.value, salt=args.salt, rel=args.rel,
                             mistakes={h: float(v) for h, v in pairs}, hint=args.hint)
    else:
        sealed = seal_choice(args.what, args.answer, salt=args.salt,
                             choices=args.choices.split(","), hints=dict(pairs), hint=args.hint)
    print(f"sealed {sealed.what!r} into {store(sealed)} as SEALED[{sealed.salt!r}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
