"""The learner's own notebook, as graded, as an HTML page: ``OUT/feedback/<student>/
<assignment>.html``.

nbgrader's ``generate_feedback`` renders the autograded notebook with every test cell's code,
hidden tests included (nbgrader issue #917), and the failing assert's traceback quotes the
hidden line.  :func:`render_html` renders the same notebook with nbconvert's
``HTMLExporter`` after taking out what a learner must not see:

* each test cell's hidden block (the lines between ``### BEGIN HIDDEN TESTS`` and
  ``### END HIDDEN TESTS``, the markers too) and any other line equal to a hidden-test line;
* each test cell's outputs (its traceback quotes the test's code), replaced by a box with the
  cell's points and the check's message (:class:`~course_tools.feedback.CellResult`,
  redacted again with :func:`~course_tools.feedback.redact`);
* any other output, or source line, that quotes a hidden-test line (a learner's cell that
  prints ``In`` or a test's source): withheld, saying so;
* cell metadata (nbgrader's checksums of the hidden tests' source among it) and the check
  records the course's checks publish for the grader (``application/vnd.course-check-record``).

The page opens with the total, the status and the notes, and the points of every test cell.
A submission that could not be graded (no notebook) gets the Markdown summary as a page.
"""
from __future__ import annotations

import copy
import html
import re

import nbformat

from .feedback import (HIDDEN_BEGIN, HIDDEN_END, STATUS_WORDS, Report, redact,
                       render_markdown)

_RECORD_PREFIX = "application/vnd.course-check-record"
"""Outputs the course's checks publish for the grader (course_lib.checks.records.MIME)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WITHHELD_OUTPUT = "[output withheld: it quotes a hidden test]"
WITHHELD_LINE = "# [line withheld: it quotes a hidden test]"


def _pts(x: float) -> str:
    return f"{x:g}"


def _needles(hidden: list[str]) -> list[str]:
    return [h.strip() for h in hidden if len(h.strip()) >= 4]


def _quotes(text: str, needles: list[str]) -> bool:
    return any(n in text for n in needles)


def strip_hidden(source: str, needles: list[str]) -> str:
    """``source`` without its hidden-test blocks (markers included) and without any line
    that holds a hidden-test line."""
    out, inside = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line:
            inside = True
            continue
        if HIDDEN_END in line:
            inside = False
            continue
        if inside:
            continue
        out.append(WITHHELD_LINE if line.strip() and _quotes(line, needles) else line)
    return "\n".join(out).rstrip()


def _output_text(out) -> str:
    """Every string an output holds (stream text, error and traceback, each data value),
    terminal colours removed."""
    parts: list[str] = []

    def walk(x):
        if isinstance(x, str):
            parts.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
    walk({k: v for k, v in out.items() if k != "metadata"})
    return _ANSI.sub("", "\n".join(parts))


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return bool(meta.get("grade")) and not meta.get("solution")


def _gid(cell) -> str:
    return (cell.get("metadata", {}).get("nbgrader", {}) or {}).get("grade_id", "") or ""


def _raw_html(text: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_raw_cell(text)
    cell.metadata["raw_mimetype"] = "text/html"
    return cell


def _box(c, hidden: list[str]) -> str:
    if c.needs_manual_grade:
        verdict = "to be graded by hand"
    elif c.score >= c.max_score:
        verdict = "passed"
    else:
        verdict = "failed"
    kind = "course-pass" if verdict == "passed" else "course-fail"
    msg = redact(c.message, hidden) if c.message else ""
    if verdict == "failed" and not msg:
        msg = "(no message: the cell stopped or scored 0 without raising an error)"
    # nbconvert passes raw cells through bleach: only its allowed tags, class and id
    parts = [f'<div class="course-feedback {kind}">',
             f"<b>{html.escape(c.grade_id)}: {_pts(c.score)} / {_pts(c.max_score)} points"
             f"</b> ({verdict})"]
    if msg:
        parts.append(f"<pre>{html.escape(msg)}</pre>")
    if c.note:
        parts.append(f"<div><i>{html.escape(c.note)}</i></div>")
    parts.append("</div>")
    return "\n".join(parts)


def _title(r: Report) -> str:
    return f"# {r.assignment}: {_pts(r.score)} / {_pts(r.max_score)} points"


def _header(r: Report, hidden: list[str]) -> str:
    words = STATUS_WORDS.get(r.status, r.status)
    rows = "".join(f"<li><code>{html.escape(c.grade_id)}</code>: {_pts(c.score)} / "
                   f"{_pts(c.max_score)} points</li>" for c in r.cells)
    notes = [c for c in [r.detail] if c and r.status != "graded"] + list(r.notes)
    notes = [redact(n, hidden) for n in notes]
    out = ['<div class="course-summary">',
           f"<div>Status: <b>{html.escape(r.status)}</b>"
           + (f" ({html.escape(words)})" if words != r.status else "")
           + (" &middot; <b>late</b>" if getattr(r, "late", None) else "") + "</div>"]
    if rows:
        out.append(f'<div>Test cells:</div><ul class="course-points">{rows}</ul>')
    if notes:
        out.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    if r.answer_errors:
        out.append("<div>Answer cells that raised an error (a test that uses a name your "
                   "answer did not define fails too):</div><ul>" + "".join(
                       f"<li><code>{html.escape(g)}</code>: "
                       f"{html.escape(redact(t, hidden))}</li>"
                       for g, t in r.answer_errors.items()) + "</ul>")
    out.append("<div>Below: your notebook as it was graded; under each test cell, its points "
               "and what the check said.</div></div>")
    return "\n".join(out)


_CSS = """<style>
.course-feedback { padding: 0.4em 1em; margin: 0.3em 0 1em 0; border-radius: 4px; }
.course-pass { background: #e6f4ea; }
.course-fail { background: #fdecea; }
.course-feedback pre { white-space: pre-wrap; margin: 0.3em 0 0 0; }
.course-summary { margin-bottom: 1em; border-bottom: 1px solid #ccc; padding-bottom: 0.5em; }
</style>
"""


def feedback_notebook(graded: nbformat.NotebookNode | None, report: Report,
                      hidden: list[str]) -> nbformat.NotebookNode:
    """The notebook :func:`render_html` renders (see the module docstring): ``graded`` is
    the autograded notebook (``OUT/course/autograded/<student>/<assignment>/<nb>.ipynb``) or
    ``None``; ``hidden``: the hidden-test lines (:func:`course_tools.feedback.hidden_lines`)."""
    needles = _needles(hidden)
    if graded is None:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_markdown_cell(render_markdown(report))]
        return nb
    nb = copy.deepcopy(graded)
    by_gid = {c.grade_id: c for c in report.cells}
    cells = [nbformat.v4.new_markdown_cell(_title(report)), _raw_html(_header(report, hidden))]
    for cell in nb.cells:
        test, gid = _is_test(cell), _gid(cell)
        cell.metadata = nbformat.NotebookNode()
        cell.source = strip_hidden(cell.source, needles)
        if cell.cell_type == "code":
            cell.execution_count = None
            if test:
                cell.outputs = []
            else:
                kept = []
                for out in cell.get("outputs", []):
                    data = out.get("data")
                    if isinstance(data, dict):  # the grader's check records are not for show
                        for mime in [m for m in data if m.startswith(_RECORD_PREFIX)]:
                            del data[mime]
                        if not data:
                            continue
                    if _quotes(_output_text(out), needles):
                        kept.append(nbformat.v4.new_output("stream", name="stdout",
                                                           text=WITHHELD_OUTPUT + "\n"))
                    else:
                        kept.append(out)
                cell.outputs = kept
        elif cell.cell_type == "raw":
            cell.metadata["raw_mimetype"] = "text/plain"  # a learner's raw cell is not HTML
        cells.append(cell)
        if test and gid in by_gid:
            cells.append(_raw_html(_box(by_gid[gid], hidden)))
    nb.cells = cells
    nb.metadata = nbformat.NotebookNode({k: v for k, v in nb.metadata.items()
                                         if k in ("kernelspec", "language_info")})
    return nb


def render_html(graded: nbformat.NotebookNode | None, report: Report,
                hidden: list[str]) -> str:
    """The feedback page (HTML text) of ``report`` (see the module docstring)."""
    from nbconvert import HTMLExporter

    nb = feedback_notebook(graded, report, hidden)
    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(nb, resources={
        "metadata": {"name": f"{report.assignment}: feedback"}})
    return body.replace("</head>", _CSS + "</head>", 1)
