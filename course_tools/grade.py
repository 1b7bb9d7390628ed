"""Grade a folder of submissions with nbgrader's autograder.

    python -m course_tools.grade SUBMISSIONS --out OUT [--assignment A ...]

SUBMISSIONS holds ``<student>/<assignment>/<assignment>.ipynb``.  Nothing in SUBMISSIONS or
in the repository is modified: everything happens on copies in a fresh nbgrader root,
``OUT/course/``:

1. ``generate_assignment --force`` on a copy of ``solutions/<assignment>/`` builds a new
   SQLite gradebook (``OUT/course/gradebook.db``) holding the graded and hidden test cells;
2. each student's folder is checked (missing, misnamed, not JSON, not a notebook) and, if
   usable, copied to ``OUT/course/submitted/<student>/<assignment>/``;
3. ``autograde --force`` runs once per student and assignment, so a notebook that makes
   nbgrader abort only costs that student that assignment;
4. results are read back from the gradebook and the autograded notebooks and written to
   ``OUT/grades.csv`` (student, assignment, score, max_score, status, detail),
   ``OUT/results.json`` (the same with per-cell points), ``OUT/feedback/<student>/
   <assignment>.md`` (see :mod:`course_tools.feedback`: no hidden test code) and
   ``OUT/logs/<student>/<assignment>.log`` (nbgrader's log).

Statuses: ``graded``; ``missing`` (no folder or no notebook); ``misnamed`` (a notebook or
folder under another name: rename it and grade again); ``invalid_json``; ``invalid_notebook``
(JSON but not a notebook); ``bad_student_id`` (folder name nbgrader cannot use as an id);
``autograde_error`` (nbgrader itself failed: see the log).  Ungraded rows score 0.

Exit status: 0 when every row was written and nbgrader ran where it could, 1 when nbgrader
failed on some submission (``autograde_error``), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path

import nbformat

from . import (REPO_ROOT, assignments as course_assignments, copy_tree, course_dirs,
               open_gradebook, remove_tree, run_nbgrader)
from .feedback import (MISSING_CELL, CellResult, Report, hidden_lines, read_problems,
                       render_markdown)

GRADED, MISSING, MISNAMED = "graded", "missing", "misnamed"
INVALID_JSON, INVALID_NOTEBOOK = "invalid_json", "invalid_notebook"
BAD_STUDENT_ID, AUTOGRADE_ERROR = "bad_student_id", "autograde_error"
STATUSES = (GRADED, MISSING, MISNAMED, INVALID_JSON, INVALID_NOTEBOOK, BAD_STUDENT_ID,
            AUTOGRADE_ERROR)

MARKER = ".course-tools-grade"
"""File that marks a folder as this tool's output (so a re-run may clear it)."""
_OUTPUTS = ("course", "feedback", "logs", "grades.csv", "results.json")
_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")  # nbgrader reads ids as globs
CSV_FIELDS = ("student", "assignment", "score", "max_score", "status", "detail")


class GradeError(RuntimeError):
    """The grading run cannot start (bad paths, unknown assignment, broken source)."""


def _within(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def _prepare_out(out: Path, submissions: Path, course: Path) -> None:
    source, release = course_dirs(course)
    for a, b, why in [(out, submissions, "inside SUBMISSIONS"), (submissions, out, "around SUBMISSIONS"),
                      (course, out, "the course root or around it"),
                      (out, course / source, f"inside {source}/"),
                      (out, course / release, f"inside {release}/")]:
        if _within(a, b):
            raise GradeError(f"--out {out} must not be {why}")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise GradeError(f"--out {out} exists and is not an earlier grading output "
                         f"(no {MARKER}): choose an empty or new folder")
    for name in _OUTPUTS:
        p = out / name
        remove_tree(p) if p.is_dir() else p.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("Output of python -m course_tools.grade; cleared on re-run.\n")


def _fmt(x: float) -> str:
    return f"{x:g}"


def inspect_submission(student_dir: Path, assignment: str, notebooks: list[str]
                       ) -> tuple[str, str]:
    """``(status, detail)`` for one student's folder before grading: ``graded`` means
    "usable" here; the other statuses say what is wrong, in words a student understands."""
    folder = student_dir / assignment
    expected = [f"{nb}.ipynb" for nb in notebooks]
    if not folder.is_dir():
        elsewhere = sorted(str(p.relative_to(student_dir)) for name in expected
                           for p in [*student_dir.glob(name), *student_dir.glob(f"*/{name}")])
        near = sorted(p.name for p in student_dir.iterdir()
                      if p.is_dir() and p.name.lower().replace(" ", "").replace("_", "")
                      == assignment.lower().replace("_", ""))
        if elsewhere or near:
            found = ", ".join(elsewhere or [n + "/" for n in near])
            return MISNAMED, f"found {found}; expected {assignment}/{expected[0]}"
        return MISSING, f"no folder {assignment}/ in the submission"
    present = [n for n in expected if (folder / n).is_file()]
    if not present:
        others = sorted(p.name for p in folder.glob("*.ipynb"))
        if others:
            return MISNAMED, (f"found {', '.join(others)} in {assignment}/; expected "
                              f"{', '.join(expected)}")
        return MISSING, f"no notebook {expected[0]} in {assignment}/"
    for name in present:
        raw = (folder / name).read_bytes()
        try:
            json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return INVALID_JSON, f"{name} is not valid JSON ({exc}); the file may be damaged"
        try:
            nbformat.reads(raw.decode("utf-8"), as_version=4)
        except Exception as exc:  # nbformat raises several kinds
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return INVALID_NOTEBOOK, f"{name} is JSON but not a notebook ({first[:200]})"
    missing = sorted(set(expected) - set(present))
    return GRADED, (f"missing {', '.join(missing)} (scored 0)" if missing else "")


def _read_gradebook(db_url: str, student: str, assignment: str):
    """``(max_score, score or None, [CellResult])`` of one submission, from the gradebook."""
    from nbgrader.api import MissingEntry

    with open_gradebook(db_url) as gb:
        max_score = float(gb.find_assignment(assignment).max_score)
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return max_score, None, []
        cells = [CellResult(g.name, nb.name, float(g.score), float(g.max_score),
                            bool(g.needs_manual_grade))
                 for nb in sub.notebooks for g in nb.grades]
        return max_score, float(sub.score), cells


def _diagnose(folder: Path, notebooks: list[str]) -> list[str]:
    """Known causes of nbgrader aborting, in words (nbgrader's own message misleads:
    a duplicated graded cell is reported as an old metadata version)."""
    found = []
    for name in notebooks:
        path = folder / f"{name}.ipynb"
        if not path.is_file():
            continue
        nb = nbformat.read(path, as_version=4)
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
        for gid in sorted({i for i in ids if i and ids.count(i) > 1}):
            found.append(f"{path.name}: cell {gid!r} appears {ids.count(gid)} times (a copied "
                         "cell keeps its id: delete the copy)")
    return found


class _Source:
    """What grading needs from an assignment's source: notebook names, cell order, hidden
    test lines (to keep them out of feedback)."""

    def __init__(self, folder: Path, notebooks: list[str]):
        self.notebooks = notebooks
        self.order: dict[tuple[str, str], int] = {}
        self.hidden: list[str] = []
        for nb_name in notebooks:
            nb = nbformat.read(folder / f"{nb_name}.ipynb", as_version=4)
            self.hidden += hidden_lines(nb)
            for i, cell in enumerate(nb.cells):
                self.order[(nb_name, cell.metadata.get("nbgrader", {}).get("grade_id"))] = i


def _grade_one(student_dir: Path, name: str, src: _Source, root: Path, out: Path,
               course: Path, echo) -> Report:
    """Check, copy, autograde and read back one student's one assignment."""
    student = student_dir.name
    db_url = f"sqlite:///{root / 'gradebook.db'}"
    if not _STUDENT_ID.match(student):
        report = Report(student, name, BAD_STUDENT_ID, (
            f"folder name {student!r} is not a usable student id (letters, digits and "
            "_ . @ + - only)"))
    else:
        report = Report(student, name, *inspect_submission(student_dir, name, src.notebooks))
    if report.status == GRADED:
        copy_tree(student_dir / name, root / "submitted" / student / name)
        echo(f"  autograding {student}/{name} ...")
        run = run_nbgrader("autograde", root, course, name, student)
        log = out / "logs" / student / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(run.log + ("\n" + run.error if run.error else ""))
        if not run.ok:
            report.status = AUTOGRADE_ERROR
            report.detail = "; ".join(
                _diagnose(student_dir / name, src.notebooks)
                + [f"nbgrader could not grade this notebook ({run.last_error()})"])
    if report.status != GRADED:
        report.max_score = _read_max(db_url, name)
        return report

    report.max_score, score, cells = _read_gradebook(db_url, student, name)
    report.score = score or 0.0
    cells.sort(key=lambda c: (c.notebook, src.order.get((c.notebook, c.grade_id), 0)))
    for nb_name in src.notebooks:
        path = root / "autograded" / student / name / f"{nb_name}.ipynb"
        if not path.is_file():
            continue
        tests, answers, present = read_problems(path, src.hidden)
        for c in cells:
            if c.notebook != nb_name:
                continue
            c.message = tests.get(c.grade_id, "")
            if c.grade_id not in present:
                # nbgrader leaves a deleted test cell unscored and "needing manual grading"
                # (OverwriteCells restores only cells that are there unless
                # add_missing_cells is set): it scores 0.
                c.message, c.needs_manual_grade = MISSING_CELL, False
        report.answer_errors.update(answers)
    report.cells = cells
    return report


def grade(submissions: Path, out: Path, names: list[str] | None = None,
          course: Path = REPO_ROOT, echo=None) -> list[Report]:
    """Grade every student folder in ``submissions`` for ``names`` (default: the course's
    assignments that some student submitted) and write the results under ``out``.

    Returns one :class:`~course_tools.feedback.Report` per student and assignment.  Raises
    :class:`GradeError` when grading cannot start.
    """
    submissions, out, course = Path(submissions).resolve(), Path(out).resolve(), Path(course).resolve()
    echo = echo or (lambda *a: print(*a, flush=True))
    if not submissions.is_dir():
        raise GradeError(f"SUBMISSIONS {submissions} is not a folder")
    known = course_assignments(course)
    entries = sorted(p for p in submissions.iterdir() if not p.name.startswith((".", "__")))
    students = [p for p in entries if p.is_dir()]
    ignored = [p.name for p in entries if not p.is_dir()]
    if names:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise GradeError(f"unknown assignment(s) {', '.join(unknown)}; "
                             f"the course has {', '.join(known) or 'none'}")
    else:
        names = sorted({d.name for s in students for d in s.iterdir()
                        if d.is_dir() and d.name in known})
        if not names:
            raise GradeError(f"no folder in {submissions} is named after an assignment "
                             f"({', '.join(known) or 'none in the course'}); "
                             "pass --assignment to grade anyway")
    ignored += sorted(f"{s.name}/{d.name}" for s in students for d in s.iterdir()
                      if d.is_dir() and d.name not in known and not d.name.startswith("."))

    _prepare_out(out, submissions, course)
    root = out / "course"
    source, release = course_dirs(course)
    root.mkdir()
    if (course / "nbgrader_config.py").is_file():
        (root / "nbgrader_config.py").write_bytes((course / "nbgrader_config.py").read_bytes())
    notebooks: dict[str, list[str]] = {}
    for name in names:
        copy_tree(course / source / name, root / source / name)
        result = run_nbgrader("generate_assignment", root, course, name)
        if not result.ok:
            raise GradeError(f"nbgrader generate_assignment {name} failed: {result.last_error()}")
        notebooks[name] = sorted(p.stem for p in (root / release / name).glob("*.ipynb"))
    sources = {name: _Source(root / source / name, notebooks[name]) for name in names}
    reports: list[Report] = []
    echo(f"Grading {', '.join(names)} for {len(students)} student(s) from {submissions}")
    for student_dir in students:
        for name in names:
            reports.append(_grade_one(student_dir, name, sources[name], root, out, course, echo))

    _write_outputs(out, reports)
    _print_report(reports, out, ignored, echo)
    return reports


def _read_max(db_url: str, assignment: str) -> float:
    with open_gradebook(db_url) as gb:
        return float(gb.find_assignment(assignment).max_score)


def _write_outputs(out: Path, reports: list[Report]) -> None:
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in reports:
            w.writerow([r.student, r.assignment, _fmt(r.score), _fmt(r.max_score), r.status,
                        r.detail])
    (out / "results.json").write_text(json.dumps([asdict(r) for r in reports], indent=1) + "\n")
    for r in reports:
        path = out / "feedback" / r.student / f"{r.assignment}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_markdown(r))


def _print_report(reports: list[Report], out: Path, ignored: list[str], echo) -> None:
    width = max([len(r.student) for r in reports] + [7])
    echo("")
    for r in reports:
        line = f"  {r.student:<{width}}  {r.assignment:<10} {_fmt(r.score):>5} / {_fmt(r.max_score):<5} {r.status}"
        echo(line + (f": {r.detail}" if r.detail else ""))
    counts = {}
    for r in reports:
        counts[r.status] = counts.get(r.status, 0) + 1
    echo("")
    echo(f"{len({r.student for r in reports})} student(s), {len(reports)} row(s): "
         + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if ignored:
        echo(f"ignored (not a student folder or not an assignment): {', '.join(ignored)}")
    echo(f"grades: {out / 'grades.csv'}  feedback: {out / 'feedback'}/  "
         f"nbgrader logs: {out / 'logs'}/  gradebook: {out / 'course' / 'gradebook.db'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.grade",
        description="Autograde SUBMISSIONS/<student>/<assignment>/<assignment>.ipynb with "
                    "nbgrader, on copies; write OUT/grades.csv and OUT/feedback/.")
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    parser.add_argument("--out", type=Path, default=Path("grading"),
                        help="output folder (default: ./grading); cleared if it holds an "
                             "earlier grading run, refused if it holds anything else")
    parser.add_argument("--assignment", action="append", dest="assignments", metavar="A",
                        help="grade only this assignment (repeatable; default: every "
                             "assignment some student submitted)")
    parser.add_argument("--course", type=Path, default=REPO_ROOT,
                        help="course root holding nbgrader_config.py and solutions/ "
                             "(default: this repository)")
    args = parser.parse_args(argv)
    try:
        reports = grade(args.submissions, args.out, args.assignments, args.course)
    except GradeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if any(r.status == AUTOGRADE_ERROR for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
