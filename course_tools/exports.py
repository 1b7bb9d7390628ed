"""Grades out: ``grades.csv`` and the files the LMSs import, written from the graded rows
(:class:`course_tools.feedback.Report`).

* :func:`write_grades_csv`: ``OUT/grades.csv``, one row per student and assignment:
  :data:`GRADES_FIELDS` (the grade command's columns, then the LMS id, name and late flag).
* :func:`write_canvas_gradebook`: a Canvas gradebook import file made from the instructor's
  own gradebook export (Grades > Export), with the assignment's column updated (an existing
  ``<assignment> (<id>)`` column) or added (a new column named after the assignment, which
  Canvas creates as a new assignment on import).  Canvas's leading columns (``Student``,
  ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``; ``Integration ID`` when the export has
  it) and its ``Points Possible`` row are kept as exported; the new column's points possible
  are the assignment's maximum score.  Students are matched by Canvas user id (``ID``, the id in
  a Canvas submissions download), else by ``SIS Login ID`` or ``SIS User ID``.  Source: Canvas
  Instructor Guide, "How do I import grades in the Gradebook?" and "How do I export grades in
  the Gradebook?".
* :func:`write_moodle_worksheet`: Moodle's offline grading worksheet (Assignment > View all
  submissions > Grading action > Upload grading worksheet) with :data:`MOODLE_FIELDS`.  The
  importer finds the columns by these headers (``Identifier`` = ``Participant <id>``,
  ``Grade``, ``Last modified (grade)``, ``Feedback comments``); a row whose grade is older
  than Moodle's is skipped unless "Allow updating records that have been modified more
  recently in Moodle" is ticked, so ``Last modified (grade)`` is the time of writing.
  Given Moodle's own downloaded worksheet (``--roster``), its rows and columns are kept and
  filled.  Source: Moodle ``mod/assign/feedback/offline`` (``importgradeslib.php``) and the
  assign module's language strings.

Feedback comments hold only the score and status (never a test's message): the full
feedback is the student's HTML file.
"""
from __future__ import annotations

import csv
import io
import re
import time
from pathlib import Path

GRADES_FIELDS = ("student", "assignment", "score", "max_score", "status", "detail",
                 "lms_id", "name", "late")
CANVAS_LEADING = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
"""Columns Canvas requires in a gradebook import, in its export's order (``Integration ID``,
when the export has it, sits before ``Section`` and is kept too)."""
CANVAS_POINTS_ROW = "Points Possible"
MOODLE_FIELDS = ("Identifier", "Full name", "Email address", "Status", "Grade",
                 "Maximum Grade", "Grade can be changed", "Last modified (submission)",
                 "Last modified (grade)", "Feedback comments")
MOODLE_PARTICIPANT = "Participant "
MOODLE_TIME = "%A, %d %B %Y, %I:%M %p"
"""How Moodle writes times in the worksheet (``userdate``'s ``strftimedatetime``)."""


class ExportError(ValueError):
    """An LMS file that cannot be read or filled (one line, naming the problem)."""


def _fmt(x: float) -> str:
    return f"{x:g}"


def _late(late) -> str:
    return "" if late is None else ("yes" if late else "no")


def write_grades_csv(path: Path, reports) -> None:
    """``grades.csv``: :data:`GRADES_FIELDS`, one row per report (``late``: yes, no, or empty
    when the LMS did not say)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(GRADES_FIELDS)
        for r in reports:
            w.writerow([r.student, r.assignment, _fmt(r.score), _fmt(r.max_score), r.status,
                        r.detail, getattr(r, "lms_id", "") or r.student,
                        getattr(r, "name", ""), _late(getattr(r, "late", None))])


def _read_csv(path: Path, what: str) -> list[list[str]]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"{what} {path} cannot be read ({exc})") from None
    return [row for row in csv.reader(io.StringIO(text))]


def read_canvas_export(path: Path) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of a Canvas gradebook export; :class:`ExportError` if the required
    leading columns are not there."""
    rows = _read_csv(path, "Canvas gradebook export")
    if not rows:
        raise ExportError(f"Canvas gradebook export {path} is empty")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in CANVAS_LEADING if c not in header]
    if missing:
        raise ExportError(f"{Path(path).name} is not a Canvas gradebook export: no column "
                          f"{', '.join(missing)} (Canvas: Grades > Export > Export Entire "
                          "Gradebook)")
    return header, [r + [""] * (len(header) - len(r)) for r in rows[1:]]


def _canvas_column(header: list[str], assignment: str, title: str | None) -> int | None:
    """The column of ``assignment`` in a Canvas export: its header without the ``(<id>)``
    Canvas appends, compared without case, spaces or punctuation (``Lesson 1 (98765)`` is
    ``lesson1``'s column); else the one header that starts with that name and goes on with words
    (``Lesson 3: The block (2003)`` is ``lesson3``'s; ``Lesson 30`` is not).  None if there is no
    such column, or several start so (which one is not guessed)."""
    def key(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())
    names = [re.sub(r"\s*\(\d+\)\s*$", "", h) for h in header]
    want = {key(assignment), key(title or assignment)}
    for i, h in enumerate(names):
        if key(h) in want:
            return i
    start = re.compile(r"[\W_]*" + r"[\W_]*".join(map(re.escape, re.findall(r"[a-z]+|\d+", assignment.lower())))
                       + r"(?![a-z0-9])")
    found = [i for i, h in enumerate(names) if start.match(h.lower())]
    return found[0] if len(found) == 1 else None


def write_canvas_gradebook(export: Path, reports, assignment: str, path: Path,
                           title: str | None = None) -> list[str]:
    """Write the Canvas import file for ``assignment`` from the gradebook ``export`` (see the
    module docstring) to ``path``; returns notes (students graded but not in the gradebook,
    students in it without a grade here)."""
    header, rows = read_canvas_export(export)
    mine = [r for r in reports if r.assignment == assignment]
    if not mine:
        raise ExportError(f"no graded row for {assignment} to put in the Canvas gradebook")
    col = _canvas_column(header, assignment, title)
    points = _fmt(max(r.max_score for r in mine))
    notes_new = []
    if col is None:  # a new assignment column, after the last assignment column
        notes_new.append(f"the Canvas export has no column for {assignment} (its headers are "
                         "'<assignment name> (<id>)'): a new column "
                         f"{title or assignment!r} "
                         "was added; import it as a new assignment, or rename the column")
        ends = [i for i, h in enumerate(header) if h in (
            "Current Points", "Final Points", "Current Score", "Unposted Current Score",
            "Final Score", "Unposted Final Score", "Current Grade", "Final Grade")]
        col = min(ends) if ends else len(header)
        header.insert(col, title or assignment)
        for row in rows:
            row.insert(col, "")
    idx = {c: header.index(c) for c in ("ID", "SIS Login ID", "SIS User ID", "Student")}
    by = {}
    for r in mine:
        for key in {r.student, getattr(r, "lms_id", "") or r.student}:
            by[key] = r
    used, notes = set(), notes_new
    for row in rows:
        label = row[idx["Student"]].strip()
        if label == CANVAS_POINTS_ROW:
            row[col] = points
            continue
        if not row[idx["ID"]].strip():
            continue  # another of Canvas's meta rows ("Manual Posting" ...): as exported
        r = next((by[row[idx[k]].strip()] for k in ("ID", "SIS Login ID", "SIS User ID")
                  if row[idx[k]].strip() in by), None)
        if r is None:
            notes.append(f"Canvas gradebook: {label or row[idx['ID']]} has no grade for "
                         f"{assignment} here (cell left as exported)")
            continue
        row[col] = _fmt(r.score)
        used.add(id(r))
    notes += [f"Canvas gradebook: {r.student} ({r.name or 'no name'}) is not in the export "
              "(not written)" for r in mine if id(r) not in used]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return notes


def _comment(r) -> str:
    """Moodle's feedback comment: the score and status, then where the feedback is; for a row
    that could not be graded (missing, invalid, a limit reached) the reason instead, as its
    detail says it (an autograde error's detail is for the instructor: its logs)."""
    head = f"{r.assignment}: {_fmt(r.score)} / {_fmt(r.max_score)} points ({r.status})"
    if r.status in ("graded", "blank", "autograde_error", "interrupted") or not r.detail:
        return head + "; see your feedback file"
    return f"{head}: {r.detail}"


def write_moodle_worksheet(reports, assignment: str, path: Path,
                           worksheet: Path | None = None, now: float | None = None) -> list[str]:
    """Write Moodle's grading worksheet for ``assignment`` to ``path`` (see the module
    docstring): from Moodle's own ``worksheet`` when given (its rows kept, ``Grade``,
    ``Last modified (grade)`` and ``Feedback comments`` filled), else one row per report with
    :data:`MOODLE_FIELDS`.  Returns notes (students the worksheet lacks)."""
    mine = [r for r in reports if r.assignment == assignment]
    stamp = time.strftime(MOODLE_TIME, time.localtime(now))
    notes: list[str] = []
    if worksheet is not None:
        rows = _read_csv(worksheet, "Moodle grading worksheet")
        header = [h.strip() for h in rows[0]] if rows else []
        for c in ("Identifier", "Grade", "Last modified (grade)"):
            if c not in header:
                raise ExportError(f"{Path(worksheet).name} is not a Moodle grading worksheet: "
                                  f"no column {c!r}")
        if "Feedback comments" not in header:
            header.append("Feedback comments")
        body = [r + [""] * (len(header) - len(r)) for r in rows[1:]]
        by = {(getattr(r, "lms_id", "") or r.student): r for r in mine}
        used = set()
        for row in body:
            m = re.search(r"(\d+)\s*$", row[header.index("Identifier")])
            r = by.get(m.group(1)) if m else None
            if r is None:
                continue
            row[header.index("Grade")] = _fmt(r.score)
            row[header.index("Last modified (grade)")] = stamp
            row[header.index("Feedback comments")] = _comment(r)
            used.add(id(r))
        notes += [f"Moodle worksheet: {r.student} is not in it (not written)" for r in mine
                  if id(r) not in used]
    else:
        header = list(MOODLE_FIELDS)
        body = []
        for r in mine:
            ident = getattr(r, "lms_id", "") or r.student
            if not ident.isdigit():
                notes.append(f"Moodle worksheet: {ident} is not a Moodle participant id "
                             "(not written)")
                continue
            body.append([MOODLE_PARTICIPANT + ident, getattr(r, "name", ""), "",
                         ("No submission" if r.status == "missing" else
                          "Submitted for grading" + (" - late" if getattr(r, "late", None)
                                                     else "")),
                         _fmt(r.score), _fmt(r.max_score), "Yes", "", stamp, _comment(r)])
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(body)
    return notes


def _is_moodle_worksheet(path: Path | None) -> bool:
    if path is None:
        return False
    rows = _read_csv(path, "roster")
    return bool(rows) and "Identifier" in [h.strip() for h in rows[0]]


def write_lms_files(out: Path, reports, staged, hidden: dict[str, list[str]], *,
                    canvas_gradebook: Path | None = None, roster: Path | None = None,
                    moodle: bool = False) -> list[str]:
    """Everything the grade command writes for the LMS and the learner beyond its own files;
    returns notes for the report.

    * ``OUT/feedback/<student>/<assignment>.html`` for every report
      (course_tools.feedback_html; the notebook from ``OUT/course/autograded/``);
    * ``OUT/lms/canvas-<assignment>.csv`` per assignment when ``canvas_gradebook`` (a Canvas
      gradebook export) is given;
    * ``OUT/lms/moodle-<assignment>.csv`` per assignment when the submissions were a Moodle
      download (or ``moodle``) or ``roster`` is a Moodle grading worksheet (then filled in
      from it).

    ``staged``: the :class:`course_tools.lms.Staged` intake (or ``None``); ``hidden``:
    ``{assignment: hidden-test lines}``."""
    import nbformat

    from .feedback_html import render_html

    out = Path(out)
    notes: list[str] = []
    for r in reports:
        folder = out / "course" / "autograded" / r.student / r.assignment
        graded = None
        nbs = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
        if nbs:
            graded = nbformat.read(nbs[0], as_version=4)
            for extra in nbs[1:]:  # an assignment of several notebooks: one page
                graded.cells += nbformat.read(extra, as_version=4).cells
        page = out / "feedback" / r.student / f"{r.assignment}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render_html(graded, r, hidden.get(r.assignment, [])), encoding="utf-8")
    assignments = sorted({r.assignment for r in reports})
    lms_dir = out / "lms"
    moodle = moodle or (staged is not None and staged.layout == "moodle") or \
        _is_moodle_worksheet(roster)
    if canvas_gradebook is not None or moodle:
        lms_dir.mkdir(parents=True, exist_ok=True)
    for a in assignments:
        if canvas_gradebook is not None:
            notes += write_canvas_gradebook(canvas_gradebook, reports, a,
                                            lms_dir / f"canvas-{a}.csv")
            notes.append(f"Canvas gradebook import: {lms_dir / f'canvas-{a}.csv'}")
        if moodle:
            notes += write_moodle_worksheet(reports, a, lms_dir / f"moodle-{a}.csv",
                                            worksheet=roster if _is_moodle_worksheet(roster)
                                            else None)
            notes.append(f"Moodle grading worksheet: {lms_dir / f'moodle-{a}.csv'}")
    return notes
