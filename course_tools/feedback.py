"""Feedback a student may read: points per graded cell and the message of each failed test,
never the code or expected values of hidden tests.

nbgrader's own ``generate_feedback`` HTML shows every test cell's code, hidden tests
included, so it is not used.  Instead the autograded notebook is read for what each cell
raised (the exception's type and message only, no traceback, since a traceback quotes the
failing line) or wrote to stderr (nbgrader scores such a test cell 0), and any message line
that quotes a line of a hidden test is withheld.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = "BEGIN SOLUTION", "END SOLUTION"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_MESSAGE = 600
_NO_MESSAGE = {
    "NotImplementedError": "an answer this test uses is not written yet (it still raises "
                           "NotImplementedError)",
    "AssertionError": "a test failed (it gives no message)",
}
WITHHELD = "[line withheld: it quotes a hidden test]"


@dataclass
class CellResult:
    """One graded cell of one submitted notebook.

    ``score``/``max_score`` are points from the gradebook; ``message`` is what the learner
    sees about a lost point (empty when the cell passed or nothing was reported)."""
    grade_id: str
    notebook: str
    score: float
    max_score: float
    needs_manual_grade: bool = False
    message: str = ""


@dataclass
class Report:
    """One student's result on one assignment."""
    student: str
    assignment: str
    status: str
    detail: str = ""
    score: float = 0.0
    max_score: float = 0.0
    cells: list[CellResult] = field(default_factory=list)
    answer_errors: dict[str, str] = field(default_factory=dict)
    """``{answer cell grade_id: "ExceptionType: message"}`` for answer cells that raised."""


def marked_blocks(source: str, begin: str, end: str) -> list[str]:
    """The lines strictly between ``### begin`` and ``### end`` marker lines of a cell."""
    lines, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def hidden_lines(source_nb: nbformat.NotebookNode) -> list[str]:
    """Stripped, non-blank lines of every hidden-test block in a source notebook."""
    out = []
    for cell in source_nb.cells:
        out += [ln.strip() for ln in marked_blocks(cell.source, HIDDEN_BEGIN, HIDDEN_END)
                if ln.strip()]
    return out


def redact(message: str, hidden: list[str]) -> str:
    """Replace each line of ``message`` that contains a hidden-test line by :data:`WITHHELD`.

    Lines of fewer than 4 characters (a lone bracket) are not treated as revealing."""
    needles = [h for h in hidden if len(h) >= 4]
    out = []
    for line in message.splitlines():
        out.append(WITHHELD if any(h in line for h in needles) else line)
    return "\n".join(out)


def _clip(text: str) -> str:
    text = _ANSI.sub("", text).strip()
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " [...]"


def cell_problems(cell) -> str:
    """What a code cell of an autograded notebook raised or wrote to stderr, as one text:
    ``"ExceptionType: message"`` (no traceback) and/or ``"wrote to stderr: ..."``."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            ename, evalue = out.get("ename", "Error"), _clip(out.get("evalue", ""))
            if not evalue:
                evalue = _NO_MESSAGE.get(ename, "(no message)")
            parts.append(f"{ename}: {evalue}")
        elif out.get("output_type") == "stream" and out.get("name") == "stderr":
            parts.append("wrote to stderr (a warning or message on stderr fails a test "
                         f"cell): {_clip(out.get('text', ''))}")
    return "\n".join(parts)


MISSING_CELL = ("this test cell is not in your notebook (deleted, or its nbgrader metadata "
                "lost by copying): it scores 0")


def read_problems(autograded_nb: Path, hidden: list[str]
                  ) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """``({test cell id: problem}, {answer cell id: problem}, {every grade_id present})``
    from an autograded notebook, with hidden-test lines withheld."""
    nb = nbformat.read(autograded_nb, as_version=4)
    tests, answers, present = {}, {}, set()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        gid = meta.get("grade_id")
        present.add(gid)
        if cell.cell_type != "code" or not gid:
            continue
        text = cell_problems(cell)
        if not text:
            continue
        if meta.get("grade") and not meta.get("solution"):
            tests[gid] = redact(text, hidden)
        elif meta.get("solution"):
            answers[gid] = redact(text, hidden)
    return tests, answers, present


def _pts(x: float) -> str:
    return f"{x:g}"


def _quote(text: str) -> str:
    return "\n".join("> " + ln if ln else ">" for ln in text.splitlines())


def render_markdown(r: Report) -> str:
    """The learner's feedback for one assignment, as Markdown."""
    lines = [f"# {r.assignment}: {_pts(r.score)} / {_pts(r.max_score)} points", ""]
    if r.status != "graded":
        lines += [f"Your submission could not be graded automatically ({r.status}).", "",
                  r.detail, "",
                  f"Submit your notebook as `{r.assignment}/{r.assignment}.ipynb`, saved from "
                  "Jupyter, and ask your instructor to grade it again.", ""]
        return "\n".join(lines)
    several = len({c.notebook for c in r.cells}) > 1
    lines += ["| Test cell | Points | Result |", "|---|---:|---|"]
    for c in r.cells:
        name = f"{c.notebook}: {c.grade_id}" if several else c.grade_id
        result = ("to be graded by hand" if c.needs_manual_grade
                  else "passed" if c.score >= c.max_score else "failed")
        lines.append(f"| `{name}` | {_pts(c.score)} / {_pts(c.max_score)} | {result} |")
    lines.append("")
    lost = [c for c in r.cells if c.score < c.max_score and not c.needs_manual_grade]
    if lost:
        lines += ["## Tests that failed", ""]
        for c in lost:
            lines += [f"### `{c.grade_id}` ({_pts(c.score)} / {_pts(c.max_score)})", ""]
            lines += [_quote(c.message) if c.message else
                      "(no message: the cell stopped or scored 0 without raising an error)", ""]
    if r.answer_errors:
        lines += ["## Answer cells that raised an error", "",
                  "A test that uses a name your answer cell did not define fails too.", ""]
        for gid, text in r.answer_errors.items():
            lines += [f"### `{gid}`", "", _quote(text), ""]
    if not lost and not r.answer_errors:
        lines += ["Every test passed.", ""]
    return "\n".join(lines)
