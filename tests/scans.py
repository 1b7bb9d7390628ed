"""Scanners shared by several test modules (no test module imports another): what a browser
shows of a feedback page, what a release leaks of its source, the spellings of a value worth
searching for, and whether a message shows a hidden value."""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from course_tools.feedback import HIDDEN_BEGIN, HIDDEN_END, SOLUTION_BEGIN, SOLUTION_END, marked_blocks

# --- feedback pages (tests/test_feedback_html.py, test_grading.py, test_lms_grading.py) -------

class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self._skip = [], 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("style", "script")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "script") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def page_text(page: str) -> str:
    """What a browser shows of an HTML page (style and script left out)."""
    p = _Text()
    p.feed(page)
    return html.unescape("".join(p.parts))


def shown_hidden(page: str, secret: list[str]) -> list[str]:
    """The hidden-test lines (``secret``) a page shows, spaces compared loosely."""
    text = " ".join(page_text(page).split())
    return [h for h in secret if " ".join(h.split()) in text]


# --- a release against its source (tests/test_release.py, test_no_leaks.py) -------------------

MARKERS = (SOLUTION_BEGIN, SOLUTION_END, HIDDEN_BEGIN, HIDDEN_END, "BEGIN MARK SCHEME")
_NO_WORD = re.compile(r"^[\W_]*$")  # brackets, ellipses, lone '#'
_COMMON = {"else:", "try:", "finally:", "except:", "pass", "return", "break", "continue",
           "return None", "return True", "return False"}


def _nbgrader(cell) -> dict:
    return dict(cell.metadata.get("nbgrader", {}))


def _digest(nb):
    return [(c.cell_type, c.source, _nbgrader(c)) for c in nb.cells]


def leaks(source_nb, release_nb) -> list[str]:
    """Markers in the release, and lines of solution or hidden-test blocks found in it (lines
    with no letter or digit, and bare keywords like ``else:``, prove nothing and are skipped)."""
    found = []
    release_lines = set()
    for i, cell in enumerate(release_nb.cells):
        for marker in MARKERS:
            if marker in cell.source:
                found.append(f"release cell {i} holds the marker {marker!r}")
        release_lines |= {ln.strip() for ln in cell.source.splitlines()}
    for cell in source_nb.cells:
        gid = _nbgrader(cell).get("grade_id", "?")
        for kind, (begin, end) in {"solution": (SOLUTION_BEGIN, SOLUTION_END),
                                   "hidden test": (HIDDEN_BEGIN, HIDDEN_END)}.items():
            for line in marked_blocks(cell.source, begin, end):
                s = line.strip()
                if s and not _NO_WORD.match(s) and s not in _COMMON and s in release_lines:
                    found.append(f"{kind} line of {gid} is in the release: {s!r}")
    return found


# --- recorded values (tests/test_no_leaks.py, test_sealed_answers.py) -------------------------

def shape_number(i: int) -> bool:
    """A width or a context length (2^m or 3·2^m, at least 64): the course's shapes are made
    of these, so an answer equal to one is a figure of a card, not a computed secret."""
    for k in (1, 3):
        if i % k == 0 and i // k >= 64 and (i // k) & (i // k - 1) == 0:
            return True
    return False


def _forms(v) -> set[str]:
    """Spellings of a recorded value worth searching for (empty if it is too common)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return set()
    if isinstance(v, int) or float(v).is_integer():
        i = int(v)
        if abs(i) < 1000 or shape_number(abs(i)):
            return set()
        return {str(i), f"{i:,}", f"{i:_}"}
    forms = {f"{v:.{k}g}" for k in (4, 5, 6)} | {f"{v:.{k}f}" for k in (2, 3, 4)}
    if 0 < abs(v) < 1:
        forms |= {f"{100 * v:.{k}f}" for k in (1, 2)}
    # a spelling with fewer than 4 significant figures proves nothing
    return {f for f in forms if len(re.sub(r"[^0-9]", "", f).lstrip("0")) >= 4}


# --- messages (tests/test_checks_*.py) ------------------------------------------------------

def shows_none_of(message: str, *values, at_least: float = 0) -> None:
    """The message shows none of the hidden values, in any usual spelling, as a whole number
    (digits joined by ``,`` or a decimal point are one number; a digit after ``^`` is an
    exponent: "2^30" names a unit, not the value 30).  ``at_least``: values smaller in size are
    not searched for (a small count such as 16 also appears in card names and labels)."""
    for v in values:
        if abs(v) < at_least:
            continue
        if isinstance(v, float) and v.is_integer() and at_least:
            v = int(v)
        if isinstance(v, int):
            forms = {str(v), repr(v), f"{v:,}"}
        else:
            forms = {repr(v), f"{v:g}", f"{v:.1%}", f"{100 * v:.1f}",
                     *(f"{v:.{k}f}" for k in (1, 2, 3, 4))}
            forms |= {f"{v:,.0f}"} if abs(v) >= 1000 else set()
        for form in forms:
            assert not re.search(rf"(?<![\d.,^]){re.escape(form)}(?![\d,]|\.\d)", message), \
                (form, message)
