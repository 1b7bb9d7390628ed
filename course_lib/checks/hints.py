"""The words of named mistakes, as data: ``hints/<assignment>.toml`` beside this module.

A check names a known mistake ("the scores are not divided by sqrt(d_k)") when an answer
matches the value that mistake gives.  The value is computed in the lesson's checks module; the
words live in the assignment's TOML file, one table per exercise, one key per mistake::

    [attention]
    no_scale = "the scores are not divided by sqrt(d_k): scale them by 1 / sqrt(q.shape[-1])"

and the module reads them with ``HINTS = load("lesson2")``, ``HINTS["attention"]["no_scale"]``.
A text may hold ``str.format`` fields (``{d_head}``) that the check fills in.  Every key is used
by its module: tests/test_hints.py finds each one, quoted, in the module's source.  The options
of a question, which the notebook prints in order, are tables under ``options``
(``[options.tys1_options]``, ``a = "..."``), each read whole by its module
(``HINTS["options"]["tys1_options"]``).
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
    """A check's named mistakes, ``{words[key]: value}`` for each ``key=value`` in the order
    given (``words``: one exercise's table of :func:`load`); a value of None (a mistake this
    input cannot show) is left out."""
    return {words[key]: value for key, value in values.items() if value is not None}


def words(assignment: str):
    """:func:`named` for one assignment: ``words("lesson6")("kv_bytes", values=x)`` is
    ``named(load("lesson6")["kv_bytes"], values=x)``."""
    table = load(assignment)
    return lambda exercise, **values: named(table[exercise], **values)
