"""nbgrader's formgrader on a grading run, and the grades exported again with its overrides.

    python -m course_tools.formgrader serve OUT [--port P] [--no-browser]   # make formgrader OUT=...
    python -m course_tools.formgrader export OUT [--canvas-gradebook EXPORT.csv] [--roster CSV]
                                                                           # make grade-export OUT=...

``serve`` starts JupyterLab with nbgrader's formgrader extension on ``OUT/course`` (the
grading run's nbgrader root: ``gradebook.db``, ``autograded/``, the source and release), with
this interpreter's ``bin/`` first on ``PATH`` (nbgrader runs the ``alembic`` executable when
it opens a gradebook: without it the page stays on "Loading" with a 500 error) and the
course root and gradebook set on the command line (``CourseDirectory.root``).  The
instructor browses each submission, overrides a score (nbgrader's ``manual_score``) and writes
comments there.

``export`` reads the gradebook back: each cell's score is nbgrader's ``score`` (the manual
score when one was given, else the grade command's), each row's the sum; rows whose score
changed are listed ("overridden") and noted in their detail, formgrader comments are added to
the notes; then ``grades.csv``, the feedback (Markdown and HTML) and the LMS files
(course_tools.exports) are written again (``results.json`` stays as the grade command wrote
it, so an export can be run again after more changes).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from . import course_dirs, open_gradebook, use_venv_path
from .feedback import CellResult, Report, hidden_lines, render_markdown


class FormgraderError(RuntimeError):
    """A grading output that cannot be served or exported (one line)."""


def _course(out: Path) -> Path:
    course = Path(out).resolve() / "course"
    if not (course / "gradebook.db").is_file():
        raise FormgraderError(f"{out} is not a grading run's output (no course/gradebook.db): "
                              "run make grade first")
    return course


def serve_command(out: Path, port: int | None = None, open_browser: bool = True,
                  extra: list[str] | None = None) -> tuple[list[str], dict]:
    """``(argv, environment)`` that start the formgrader on ``OUT/course``."""
    course = _course(out)
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    argv = [os.path.join(bindir, "jupyter"), "lab", f"--ServerApp.root_dir={course}",
            "--LabApp.default_url=/formgrader",
            "--ServerApp.jpserver_extensions={'nbgrader.server_extensions.formgrader': True, "
            "'nbgrader.server_extensions.assignment_list': False, "
            "'nbgrader.server_extensions.course_list': False, "
            "'nbgrader.server_extensions.validate_assignment': False}",
            f"--CourseDirectory.root={course}"]
    if port:
        argv.append(f"--ServerApp.port={port}")
    if not open_browser:
        argv.append("--ServerApp.open_browser=False")
    if hasattr(os, "getuid") and os.getuid() == 0:
        argv.append("--allow-root")
    return argv + list(extra or []), env


def load_reports(out: Path) -> list[Report]:
    """The grading run's rows, from ``OUT/results.json``."""
    path = Path(out) / "results.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FormgraderError(f"cannot read {path} ({exc})") from None
    names = {f.name for f in fields(Report)}
    reports = []
    for row in rows:
        r = Report(**{k: v for k, v in row.items() if k in names and k != "cells"})
        r.cells = [CellResult(**c) for c in row.get("cells", [])]
        reports.append(r)
    return reports


def apply_overrides(out: Path, reports: list[Report]) -> list[str]:
    """Update ``reports`` in place from the gradebook's scores and comments; returns
    ``student/assignment: old -> new`` for each row whose score changed."""
    use_venv_path()
    course = _course(out)
    changed = []
    with open_gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for r in reports:
            try:
                sub = gb.find_submission(r.assignment, r.student)
            except Exception:  # nbgrader's MissingEntry: not graded (missing, misnamed ...)
                continue
            scores, comments = {}, []
            for nb in sub.notebooks:
                for g in nb.grades:
                    scores[(nb.name, g.name)] = (float(g.score), g.manual_score is not None)
                for c in nb.comments:
                    if c.manual_comment:
                        comments.append(f"{c.name}: {c.manual_comment}")
            by_hand = []
            for c in r.cells:
                s = scores.get((c.notebook, c.grade_id))
                if s is not None and s[0] != c.score:
                    by_hand.append(f"{c.grade_id} {c.score:g} -> {s[0]:g}")
                    c.score = s[0]
            new = sum(c.score for c in r.cells)
            if by_hand:
                changed.append(f"{r.student}/{r.assignment}: {r.score:g} -> {new:g}")
                note = f"score changed by the instructor ({', '.join(by_hand)})"
                r.notes.append(note)
                r.detail = "; ".join(x for x in [r.detail, note] if x)
            r.score = new
            for text in comments:
                r.notes.append(f"instructor's comment on {text}")
    return changed


def export(out: Path, canvas_gradebook: Path | None = None, roster: Path | None = None,
           echo=print) -> list[str]:
    """Write the CSVs and feedback again with the formgrader's overrides; returns the
    overridden rows."""
    from . import exports

    out = Path(out)
    reports = load_reports(out)
    changed = apply_overrides(out, reports)
    course = _course(out)
    source, _ = course_dirs(course)
    import nbformat

    hidden = {}
    for a in sorted({r.assignment for r in reports}):
        hidden[a] = [ln for p in sorted((course / source / a).glob("*.ipynb"))
                     for ln in hidden_lines(nbformat.read(p, as_version=4))]
    exports.write_grades_csv(out / "grades.csv", reports)  # results.json: as graded
    for r in reports:
        path = out / "feedback" / r.student / f"{r.assignment}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_markdown(r))
    moodle = (out / "lms").is_dir() and any((out / "lms").glob("moodle-*.csv"))
    notes = exports.write_lms_files(out, reports, None, hidden, moodle=moodle,
                                    canvas_gradebook=canvas_gradebook, roster=roster)
    echo(f"overridden in the formgrader: {', '.join(changed) if changed else 'none'}")
    for n in notes:
        echo(f"note: {n}")
    echo(f"grades: {out / 'grades.csv'}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.formgrader",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="open nbgrader's formgrader on OUT/course")
    s.add_argument("out", type=Path, metavar="OUT")
    s.add_argument("--port", type=int, default=None)
    s.add_argument("--no-browser", action="store_true")
    e = sub.add_parser("export", help="write grades.csv and the LMS files with the overrides")
    e.add_argument("out", type=Path, metavar="OUT")
    e.add_argument("--canvas-gradebook", type=Path, default=None, metavar="EXPORT.csv")
    e.add_argument("--roster", type=Path, default=None, metavar="CSV")
    args, extra = parser.parse_known_args(argv)
    try:
        if args.command == "serve":
            cmd, env = serve_command(args.out, args.port, not args.no_browser, extra)
            return subprocess.call(cmd, env=env, cwd=_course(args.out))
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        export(args.out, args.canvas_gradebook, args.roster)
    except (FormgraderError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
