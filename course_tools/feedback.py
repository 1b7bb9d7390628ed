"""Feedback a student may read: points per graded cell and a message that teaches, never the
code or the expected values of hidden tests.

nbgrader's own ``generate_feedback`` HTML shows every test cell's code, hidden tests
included, so it is not used.  The messages come from what each cell raised (the exception's
type and message only, no traceback, since a traceback quotes the failing line): the course's
checks (``course_lib.checks``) raise messages that name the likely mistake without the
expected value.  Any message line that quotes a line of a hidden test is withheld.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import nbformat

HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
SOLUTION_BEGIN, SOLUTION_END = "BEGIN SOLUTION", "END SOLUTION"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_MESSAGE = 600
WITHHELD = "[line withheld: it quotes a hidden test]"

STATUS_WORDS = {
    "graded": "graded",
    "blank": "no answer cell was changed from the release",
    "timeout": "a cell ran out of time",
    "kernel_died": "the Python kernel died",
    "memory_limit": "the notebook used more memory than a job may use",
    "process_limit": "the notebook started more processes than a job may hold",
    "disk_limit": "the notebook filled its scratch space",
    "missing": "no notebook found",
    "misnamed": "the notebook or its folder has another name",
    "invalid_json": "the file is not valid JSON",
    "invalid_notebook": "the file is not a notebook",
    "bad_student_id": "the folder name cannot be used as a student id",
    "autograde_error": "the grader failed on this notebook",
    "interrupted": "grading was interrupted before this notebook was graded",
}
"""What each status means, for students."""


@dataclass
class CellResult:
    """One graded test cell of one submitted notebook.

    ``score``/``max_score`` are points; ``message`` is what the learner sees about lost
    points (empty when the cell passed); ``note`` is said even when it passed (stderr, output
    cut)."""
    grade_id: str
    notebook: str
    score: float
    max_score: float
    needs_manual_grade: bool = False
    message: str = ""
    note: str = ""


@dataclass
class Report:
    """One student's result on one assignment.

    ``status`` is one of :data:`STATUS_WORDS`; ``detail`` says what happened in a line (the
    CSV's column); ``notes`` are repairs and remarks (also in ``detail``)."""
    student: str
    assignment: str
    status: str
    detail: str = ""
    score: float = 0.0
    max_score: float = 0.0
    cells: list[CellResult] = field(default_factory=list)
    answer_errors: dict[str, str] = field(default_factory=dict)
    """``{answer cell grade_id: "ExceptionType: message"}`` for answer cells that raised."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """Wall-clock seconds the grading job took (0 when nothing ran); not in the CSV."""
    nbgrader_scores: dict[str, float | None] = field(default_factory=dict)
    """``{"notebook/grade_id": score}`` as nbgrader's own ``determine_grade`` saw the cells in
    the worker (the kernel's view, with stderr and partial credit set aside): an audit of
    what the grader's own comparison changed.  Not in the CSV."""
    lms_id: str = ""
    """The student's id in the LMS the submissions came from (course_tools.lms)."""
    name: str = ""
    """The student's name, when the LMS download or the roster gives it."""
    late: bool | None = None
    """Late by the LMS's word (``None``: the LMS did not say)."""


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
    """Replace each line of ``message`` that contains a hidden-test line by :data:`WITHHELD`,
    strip terminal colours and clip it.

    Lines of fewer than 4 characters (a lone bracket) are not treated as revealing."""
    message = _ANSI.sub("", message or "").strip()
    needles = [h for h in hidden if len(h) >= 4]
    out = [WITHHELD if any(h in line for h in needles) else line for line in message.splitlines()]
    text = "\n".join(out)
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " [...]"


def _pts(x: float) -> str:
    return f"{x:g}"


def _quote(text: str) -> str:
    return "\n".join("> " + ln if ln else ">" for ln in text.splitlines())


def render_markdown(r: Report) -> str:
    """The learner's feedback for one assignment, as Markdown."""
    lines = [f"# {r.assignment}: {_pts(r.score)} / {_pts(r.max_score)} points", ""]
    if not r.cells and r.status != "graded":
        lines += [f"Your submission could not be graded automatically "
                  f"({STATUS_WORDS.get(r.status, r.status)}).", "", r.detail, "",
                  f"Submit your notebook as `{r.assignment}/{r.assignment}.ipynb`, saved from "
                  "Jupyter, and ask your instructor to grade it again.", ""]
        return "\n".join(lines)
    if r.status == "blank":
        lines += [f"**Blank submission**: {r.detail}.", "",
                  "Write your answers in the answer cells themselves (the tests use what they "
                  "define), run the notebook, save it and submit it again.", ""]
    elif r.status != "graded":
        lines += [f"**{STATUS_WORDS.get(r.status, r.status).capitalize()}**: {r.detail}", "",
                  "Every test cell that ran to the end counts; one that was interrupted or "
                  "did not run scores 0.", ""]
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
    remarks = [f"`{c.grade_id}`: {c.note}" for c in r.cells if c.note] + r.notes
    if remarks:
        lines += ["## Notes", ""] + [f"- {n}" for n in remarks] + [""]
    if not lost and not r.answer_errors and r.status == "graded":
        lines += ["Every test passed.", ""]
    return "\n".join(lines)
