"""The hint files (course_lib/checks/hints/*.toml): each belongs to a checks module, parses,
holds words only, and every key in it is used by that module, quoted or as a keyword (no dead hints)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_lib.checks import hints

FILES = sorted(hints.FOLDER.glob("*.toml"))
CHECKS = Path(hints.__file__).resolve().parent


def test_there_are_hint_files():
    assert FILES, f"no hint files in {hints.FOLDER}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_hint_is_words_and_used(path):
    module = CHECKS / f"{path.stem}.py"
    assert module.is_file(), f"{path.name} has no checks module {module.name}"
    source = module.read_text()
    table = dict(hints.load(path.stem))  # a copy: load is cached
    unused = []
    options = table.pop("options", {})  # a question's options, each table read whole by its name
    for name, words in options.items():
        assert isinstance(words, dict) and words, f"[options.{name}] in {path.name} is not a table of options"
        assert all(isinstance(text, str) and len(text.split()) >= 3 for text in words.values()), name
        if not re.search(rf"""["']{re.escape(name)}["']""", source):
            unused.append(f"options.{name}")
    for exercise, words in table.items():
        assert isinstance(words, dict) and words, f"[{exercise}] in {path.name} is not a table of hints"
        for key, text in words.items():
            assert isinstance(text, str) and len(text.split()) >= 3, f"{exercise}.{key}: {text!r}"
            if not re.search(rf"""["']{re.escape(key)}["']|\b{re.escape(key)}=""", source):
                unused.append(f"{exercise}.{key}")
    assert not unused, f"{module.name} never uses these hints of {path.name}: {unused}"
