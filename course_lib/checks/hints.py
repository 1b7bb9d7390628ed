"""The words of named mistakes, as data: ``hints/<assignment>.toml`` beside this module.

A check names a known mistake ("the scores are not divided by sqrt(d_k)") when an answer
matches the value that mistake gives.  The value is computed in the lesson's checks module; the
words live in the assignment's TOML file, one table per exercise, one key per mistake::

    [attention]
    no_scale = "the scores are not divided by sqrt(d_k): scale them by 1 / sqrt(q.shape[-1])"

and the module reads them with ``HINTS = load("lesson2")``, ``HINTS["attention"]["no_scale"]``.
A text may hold ``str.format`` fields (``{d_head}``) that the check fills in.  Every key is used
by its module: tests/test_hints.py finds each one, quoted, in the module's source.
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "hints"
"""Where the assignments' hint files are."""


@cache
def load(assignment: str) -> dict[str, dict[str, str]]:
    """``{exercise: {mistake: words}}`` of ``hints/<assignment>.toml``; FileNotFoundError if the
    assignment has no hint file, ``tomllib.TOMLDecodeError`` naming the line if it is malformed."""
    with open(FOLDER / f"{assignment}.toml", "rb") as f:
        return tomllib.load(f)


def named(words: dict[str, str], **values) -> dict:
    """``{words[key]: value}``: a check's mistakes keyed by their words, from one exercise's
    table of :func:`load` (``named(HINTS["attention"], no_scale=wrong_out)``)."""
    return {words[key]: value for key, value in values.items()}
