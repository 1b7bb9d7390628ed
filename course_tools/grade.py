"""Grade a folder of submissions with nbgrader's autograder: every student gets a row, one
bad notebook never stops or changes the others, and scores do not trust the kernel.

    python -m course_tools.grade SUBMISSIONS --out OUT [--assignment A ...] [--jobs N]
        [--cell-timeout S] [--notebook-timeout S] [--max-output CHARS]

SUBMISSIONS holds ``<student>/<assignment>/<assignment>.ipynb`` (an nbgrader exchange's
``submitted/`` folder), or is a Canvas, Moodle or plain download, a folder or a ``.zip``
(course_tools.lms takes it in; ``--layout``, ``--roster``, ``--canvas-gradebook``).  Nothing there, in the course,
or in the gradebook's assignment definition is modified: grading works on copies, and the
command checks (by hashing before and after) that it is so.  Steps:

1. ``generate_assignment`` on a copy of ``solutions/<assignment>/`` builds a fresh SQLite
   gradebook in ``OUT/course/`` (the test cells, hidden tests included);
2. each student's folder is checked (missing, misnamed, not JSON, not a notebook, bad id) and
   each notebook normalized on a copy (course_tools.intake: duplicated, deleted or altered
   graded cells repaired, stored outputs dropped), with a note of each repair;
3. one *job* per student and assignment, plus one per assignment for the model answer (the
   *reference*), runs nbgrader's ``Autograde`` in a worker process of its own with a gradebook
   of its own (course_tools.worker), ``--jobs`` at a time (course_tools.jobs), each under a
   wall-clock budget (``--notebook-timeout``; the process group and the kernel are killed
   when it runs out) and with a per-cell timeout (``--cell-timeout``, default
   ``Execute.timeout`` of nbgrader_config.py) and capped output (course_tools.preprocessors);
4. scores are decided from each cell's facts against the reference (course_tools.scoring),
   written into ``OUT/course/gradebook.db`` (nbgrader's own tables: ``nbgrader export`` and
   formgrader see them), and reported in ``OUT/grades.csv`` (student, assignment, score,
   max_score, status, detail), ``OUT/results.json`` (per cell), ``OUT/feedback/<student>/
   <assignment>.md`` (course_tools.feedback), ``OUT/logs/<student>/<assignment>.log`` and
   ``OUT/report.txt`` (what the command printed: one line per student, then throughput).

Statuses: ``graded``; ``blank`` (no answer cell was changed from the release and no test
cell earned a point: graded like any other, so it scores 0; a notebook that answers in cells
of its own and passes a test is ``graded``); ``timeout`` (a cell ran past its timeout, or
the notebook past its budget: cells that finished still count); ``kernel_died`` (likewise);
``missing``; ``misnamed`` (a notebook or folder under another name, named in the detail);
``invalid_json``; ``invalid_notebook``; ``bad_student_id``; ``autograde_error`` (nbgrader or
the worker failed: see the log).  Rows that could not run score 0.  Grades do not depend on
``--jobs``, on the other submissions, or on the run (timeouts aside: a cell near its limit
may finish one time and not the next).

Exit status: 0 when every row was written; 1 when nbgrader failed on some submission
(``autograde_error``) or a file that must not change did; 2 for bad arguments or a model
answer that fails its own tests.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import nbformat

from . import (REPO_ROOT, assignments as course_assignments, copy_tree, course_dirs,
               load_config, open_gradebook, remove_tree, run_nbgrader)
from . import exports, lms  # issue 12: LMS intake, LMS files and HTML feedback
from .feedback import Report, hidden_lines, render_markdown
from .intake import (INVALID_JSON, INVALID_NOTEBOOK, MISNAMED, MISSING, USABLE,
                     copy_extra_files, inspect_submission)
from .jobs import Job, run_all
from .preprocessors import role
from .scoring import (OVERRULED, JobFacts, ReferenceError_, cell_label, reference_records,
                      score_cells)

GRADED, BLANK = USABLE, "blank"
TIMEOUT, KERNEL_DIED = "timeout", "kernel_died"
BAD_STUDENT_ID, AUTOGRADE_ERROR = "bad_student_id", "autograde_error"
STATUSES = (GRADED, BLANK, TIMEOUT, KERNEL_DIED, MISSING, MISNAMED, INVALID_JSON,
            INVALID_NOTEBOOK, BAD_STUDENT_ID, AUTOGRADE_ERROR)

MARKER = ".course-tools-grade"
"""File that marks a folder as this tool's output (so a re-run may clear it)."""
_OUTPUTS = ("course", "feedback", "logs", "grades.csv", "results.json", "report.txt",
            "reference.json", "lms")
_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")  # nbgrader reads ids as globs
CSV_FIELDS = exports.GRADES_FIELDS  # issue 12: + lms_id, name, late

DEFAULT_NOTEBOOK_TIMEOUT = 600
"""Seconds of wall clock one student's assignment may take, all cells together."""
DEFAULT_MAX_OUTPUT = 200_000
"""Characters of output kept per cell (ten times that per notebook)."""
DEFAULT_MEMORY_LIMIT_GIB = 4.0
"""Address space (GiB) one notebook's kernel may use; every course notebook runs in under 3
(with torch loaded).  A cell asking for more gets a MemoryError instead of the machine's OOM
killer choosing a victim among the jobs."""
REFERENCE_STUDENT = "reference"


class GradeError(RuntimeError):
    """The grading run cannot start (bad paths, unknown assignment, broken source, a model
    answer that fails its own tests)."""


class Grading(list):
    """The :class:`~course_tools.feedback.Report` of each row (a list), plus ``problems``:
    files that changed during grading (should be empty), ``notes`` for the instructor,
    ``seconds`` and ``jobs``."""
    problems: list[str]
    notes: list[str]
    seconds: float
    jobs: int


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


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (empty if it is missing),
    leaving out paths with a part named in ``skip`` (e.g. ``__pycache__``)."""
    root = Path(root)
    if not root.is_dir():
        return {}
    out = {}
    for p in sorted(root.rglob("*")):
        if skip and any(part in skip for part in p.relative_to(root).parts):
            continue
        if p.is_symlink():  # never follow a link out of the folder (or into /dev/zero)
            out[str(p.relative_to(root))] = "link:" + os.readlink(p)
        elif p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


DEFINITION_TABLES = ("assignment", "notebook", "base_cell", "grade_cells", "solution_cells",
                     "source_cell", "task_cells")


def gradebook_definition(db: Path) -> str:
    """A hash of the gradebook's assignment definition (assignments, notebooks, cells and
    their sources and checksums), not of submissions."""
    h = hashlib.sha256()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        for table in DEFINITION_TABLES:
            for row in sorted(map(repr, con.execute(f"SELECT * FROM {table}"))):
                h.update(f"{table}:{row}\n".encode())
    finally:
        con.close()
    return h.hexdigest()


class _Source:
    """What grading needs from an assignment: notebook names, the source and release
    notebooks, the test cells ``[(notebook, grade_id, points)]`` in order, hidden-test lines,
    the number of answer cells in the release."""

    def __init__(self, source_dir: Path, release_dir: Path):
        self.dir = source_dir
        self.notebooks = sorted(p.stem for p in release_dir.glob("*.ipynb"))
        self.release = {n: nbformat.read(release_dir / f"{n}.ipynb", as_version=4)
                        for n in self.notebooks}
        self.tests: list[tuple[str, str, float]] = []
        self.hidden: list[str] = []
        self.answers = sum(role(c) == "answer" for nb in self.release.values() for c in nb.cells)
        for n in self.notebooks:
            nb = nbformat.read(source_dir / f"{n}.ipynb", as_version=4)
            self.hidden += hidden_lines(nb)
            self.tests += [(n, c.metadata["nbgrader"]["grade_id"],
                            float(c.metadata["nbgrader"].get("points", 0)))
                           for c in nb.cells if role(c) == "test"]
        self.max_score = sum(p for _, _, p in self.tests)


def _settings(course: Path, cell_timeout: int | None, notebook_timeout: float,
              max_output: int, memory_limit_gib: float = DEFAULT_MEMORY_LIMIT_GIB) -> dict:
    if cell_timeout is None:
        cfg = load_config(course)
        cell_timeout = int(cfg.get("Execute", {}).get("timeout", 30) or 30)
    for name, v in (("cell timeout", cell_timeout), ("notebook timeout", notebook_timeout),
                    ("max output", max_output)):
        if not v or v <= 0:
            raise GradeError(f"{name} must be a positive number, got {v!r}")
    if not isinstance(memory_limit_gib, (int, float)) or not 0 <= memory_limit_gib < 2**20 \
            or 0 < memory_limit_gib < 1:
        raise GradeError(f"memory limit must be 0 (none) or at least 1 GiB, got "
                         f"{memory_limit_gib!r}")
    return {"cell_timeout": int(cell_timeout), "notebook_timeout": float(notebook_timeout),
            "max_cell_output": int(max_output), "max_notebook_output": 10 * int(max_output),
            "memory_limit": int(memory_limit_gib * 2**30)}


def _make_job(work: Path, i: int, student: str, name: str, course: Path, source_dirname: str,
              src: _Source, template_db: Path, settings: dict, notebooks: dict | None,
              student_dir: Path | None) -> Job:
    """A worker root for one job: config, a gradebook copy, the assignment's non-notebook
    source files and the submission (the normalized ``notebooks``, or for the reference the
    source notebooks as they are)."""
    d = work / (f"reference-{name}" if notebooks is None else f"job-{i:04d}")
    root = d / "root"
    (root / source_dirname / name).mkdir(parents=True)
    if (course / "nbgrader_config.py").is_file():
        shutil.copyfile(course / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copyfile(template_db, root / "gradebook.db")
    copy_tree(src.dir, root / source_dirname / name)
    for p in (root / source_dirname / name).glob("*.ipynb"):
        p.unlink()
    sub = root / "submitted" / student / name
    if notebooks is None:  # the reference: the source notebooks themselves
        copy_tree(src.dir, sub)
    else:
        sub.mkdir(parents=True)
        copy_extra_files(student_dir / name, sub)
        for nb_name, nb in notebooks.items():
            nbformat.write(nb, sub / f"{nb_name}.ipynb")
    spec = {"course": str(course), "root": str(root), "assignment": name, "student": student,
            "cell_timeout": settings["cell_timeout"],
            "max_cell_output": settings["max_cell_output"],
            "max_notebook_output": settings["max_notebook_output"],
            "memory_limit": settings["memory_limit"],
            "progress": str(d / "progress.jsonl"), "result": str(d / "result.json"),
            "log": str(d / "log.txt")}
    return Job(student, name, d, spec, settings["notebook_timeout"],
               reference=notebooks is None)


def _stop_words(job: Job, facts: JobFacts, settings: dict) -> tuple[str, str, str]:
    """``(status, detail sentence, why later cells did not run)`` of a finished job."""
    ended = list(facts.by_index.values())
    if job.over_budget:
        where = cell_label(facts.running) if facts.running else "its start-up"
        budget = f"the notebook ran past its {settings['notebook_timeout']:g} s budget"
        return TIMEOUT, f"timed out in {where}: {budget}", f"{budget} in {where}"
    dead = [e for e in ended if e.get("status") == "dead"]
    if dead:
        return (KERNEL_DIED, f"kernel died in {cell_label(dead[0])}; later cells did not run",
                dead[0].get("reason", ""))
    slow = [e for e in ended if e.get("status") in ("timeout", "unresponsive")]
    if slow:
        first = slow[0]
        how = ("ignored the interrupt, so the kernel was stopped and later cells did not run"
               if first.get("status") == "unresponsive" else "was interrupted")
        more = f" (and {len(slow) - 1} more cell(s))" if len(slow) > 1 else ""
        return (TIMEOUT, f"timed out in {cell_label(first)}{more}: it ran past the "
                f"{settings['cell_timeout']} s limit per cell and {how}",
                first.get("reason", ""))
    result = job.result()
    if result is None:
        where = f" in {cell_label(facts.running)}" if facts.running else ""
        how = (f"killed by signal {-job.exit_code}" if job.exit_code and job.exit_code < 0
               else f"exit code {job.exit_code}")
        return (AUTOGRADE_ERROR, f"grading stopped abnormally{where} ({how}); see the log",
                f"grading stopped abnormally{where}")
    if not result.get("ok"):
        lines = [ln.strip() for ln in result.get("error", "").splitlines() if ln.strip()]
        return (AUTOGRADE_ERROR, f"nbgrader could not grade this notebook "
                f"({(lines[-1] if lines else 'unknown error')[:300]})", "nbgrader failed")
    return GRADED, "", ""


def blank_words(n_answers: int, changed: list[str], added: int, cells: list) -> str:
    """The detail sentence of a *blank* submission, or "" if it is not blank.

    Blank: the release has answer cells, none of them was changed (``changed``, from
    :func:`course_tools.intake.answers_changed`), and no test cell (``cells``, the
    :class:`~course_tools.feedback.CellResult` list) earned a point.  ``added`` code cells
    of the learner's own are named, since they might hold work done outside the answer cells."""
    if not n_answers or changed or any(c.score > 0 for c in cells):
        return ""
    extra = (f" (it has {added} code cell{'s' if added != 1 else ''} the release does not "
             "have, but no test passed)") if added else ""
    return "no answer cell was changed from the release" + extra


def _finish_job(job: Job, src: _Source, reference: dict, settings: dict, report: Report,
                out: Path, root: Path, db_url: str, changed: list[str], added: int) -> None:
    """Score a student's job, record it in the master gradebook, keep its log and notebook.

    ``changed``/``added``: the intake's answer cells that differ from the release and code
    cells not in it (a finished notebook with neither and no points is ``blank``)."""
    facts = JobFacts.from_events(job.events())
    status, sentence, why = _stop_words(job, facts, settings)
    report.seconds = job.seconds
    report.cells, report.answer_errors, notes = score_cells(
        facts, src.tests, reference, src.hidden, settings["cell_timeout"], why)
    if status == GRADED:
        blank = blank_words(src.answers, changed, added, report.cells)
        if blank:
            status, sentence = BLANK, blank
    report.status = status
    report.notes += notes
    if report.answer_errors and status == GRADED:  # a test may pass all the same
        report.notes.append(f"answer cell(s) {', '.join(report.answer_errors)} raised an error "
                            "(see the feedback)")
    report.nbgrader_scores = {k: v[0] for k, v in (job.result() or {}).get(
        "nbgrader_scores", {}).items()}
    report.score = sum(c.score for c in report.cells)
    report.detail = "; ".join(x for x in [sentence, *report.notes] if x)
    log = out / "logs" / job.student / f"{job.assignment}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    text = (job.dir / "log.txt").read_text(encoding="utf-8", errors="replace") \
        if (job.dir / "log.txt").is_file() else ""
    result = job.result() or {}
    log.write_text(text[-200_000:] + (f"\n[nbgrader error]\n{result['error']}"
                                      if result.get("error") else ""), encoding="utf-8")
    graded_nb = Path(job.spec["root"]) / "autograded" / job.student / job.assignment
    if graded_nb.is_dir():
        copy_tree(graded_nb, root / "autograded" / job.student / job.assignment)
    scores = {(c.notebook, c.grade_id): c.score for c in report.cells}
    with warnings.catch_warnings(), open_gradebook(db_url) as gb:
        # nbgrader's own SQLAlchemy usage warns on every new submission: noise, not news
        warnings.simplefilter("ignore")
        gb.update_or_create_student(job.student)
        sub = gb.update_or_create_submission(job.assignment, job.student)
        for nb in sub.notebooks:
            for g in nb.grades:
                g.auto_score = scores.get((nb.name, g.name), 0.0)
                g.needs_manual_grade = False
        gb.db.commit()


def grade(submissions: Path, out: Path, names: list[str] | None = None,
          course: Path = REPO_ROOT, echo=None, *, jobs: int = 1,
          cell_timeout: int | None = None,
          notebook_timeout: float = DEFAULT_NOTEBOOK_TIMEOUT,
          max_output: int = DEFAULT_MAX_OUTPUT,
          memory_limit_gib: float = DEFAULT_MEMORY_LIMIT_GIB,
          keep_work: bool = False, layout: str | None = None, roster: Path | None = None,
          canvas_gradebook: Path | None = None) -> Grading:
    """Grade every student folder in ``submissions`` for ``names`` (default: the course's
    assignments that some student submitted) and write the results under ``out``.

    Args:
        jobs: worker processes grading at once (results do not depend on it).
        cell_timeout: seconds per cell (default: ``Execute.timeout`` of the course config).
        notebook_timeout: seconds of wall clock per student and assignment.
        max_output: characters of output kept per cell (ten times that per notebook).
        memory_limit_gib: address space one notebook's kernel may use, in GiB (0: no limit).
        keep_work: keep the worker roots (in a temporary folder, printed) for debugging.

    Returns a :class:`Grading`: one :class:`~course_tools.feedback.Report` per student and
    assignment.  Raises :class:`GradeError` when grading cannot start or the model answer
    fails its own tests.
    """
    started = time.monotonic()
    submissions, out, course = Path(submissions).resolve(), Path(out).resolve(), Path(course).resolve()
    echo = echo or (lambda *a: print(*a, flush=True))
    if not isinstance(jobs, int) or jobs < 1:
        raise GradeError(f"--jobs must be a whole number >= 1, got {jobs!r}")
    settings = _settings(course, cell_timeout, notebook_timeout, max_output, memory_limit_gib)
    known = course_assignments(course)
    # --- issue 12: LMS intake: a folder or .zip in any layout -> <student>/<assignment>/ ---
    original, staging = submissions, Path(tempfile.mkdtemp(prefix="course-intake-"))
    try:
        staged = lms.stage(submissions, staging, known, layout=layout, assignments=names,
                           roster=roster)
        if canvas_gradebook is not None:  # refused now, not after an hour of grading
            exports.read_canvas_export(canvas_gradebook)
    except (lms.LMSError, exports.ExportError) as exc:
        remove_tree(staging)
        raise GradeError(str(exc)) from None
    submissions, names = staged.root, names or staged.assignments
    echo(staged.summary())
    # --- end of the LMS intake ---
    if not submissions.is_dir():
        raise GradeError(f"SUBMISSIONS {submissions} is not a folder")
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

    _prepare_out(out, original, course)
    source, release = course_dirs(course)
    guarded = [course / "nbgrader_config.py", *(course / source / n for n in names)]
    before = {"submissions": _digest_paths([original]), "course": _digest_paths(guarded),
              "course_lib": course_lib_digest()}
    root = out / "course"
    root.mkdir()
    if (course / "nbgrader_config.py").is_file():
        shutil.copyfile(course / "nbgrader_config.py", root / "nbgrader_config.py")
    for name in names:
        copy_tree(course / source / name, root / source / name)
        result = run_nbgrader("generate_assignment", root, course, name)
        if not result.ok:
            raise GradeError(f"nbgrader generate_assignment {name} failed: {result.last_error()}")
    sources = {name: _Source(root / source / name, root / release / name) for name in names}
    db = root / "gradebook.db"
    db_url = f"sqlite:///{db}"
    definition = gradebook_definition(db)

    work = Path(tempfile.mkdtemp(prefix="course-grade-"))
    template_db = work / "gradebook.db"
    shutil.copyfile(db, template_db)
    echo(f"Grading {', '.join(names)} for {len(students)} student(s) from {submissions} "
         f"with {jobs} job(s) (cell timeout {settings['cell_timeout']} s, notebook budget "
         f"{settings['notebook_timeout']:g} s, memory "
         + (f"{settings['memory_limit'] / 2**30:g} GiB" if settings["memory_limit"] else
            "not limited") + " per notebook)")
    rows: list[Report] = []
    grading_notes: list[str] = []
    job_list: list[Job] = []
    by_job: dict[int, Report] = {}
    answered: dict[int, tuple[list[str], int]] = {}  # id(job): intake's (changed, added)
    try:
        for student_dir in students:
            student = student_dir.name
            for name in names:
                src = sources[name]
                report = Report(student, name, GRADED, max_score=src.max_score)
                rows.append(report)
                if not _STUDENT_ID.match(student):
                    report.status = BAD_STUDENT_ID
                    report.detail = (f"folder name {student!r} is not a usable student id "
                                     "(letters, digits and _ . @ + - only)")
                    continue
                intake = inspect_submission(student_dir, name, src.release)
                report.status, report.notes = intake.status, intake.notes
                report.detail = intake.detail
                if intake.status != USABLE:
                    continue
                job = _make_job(work, len(job_list), student, name, course, source, src,
                                template_db, settings, intake.notebooks, student_dir)
                by_job[id(job)] = report
                answered[id(job)] = (intake.changed, intake.added)
                job_list.append(job)

        # the model answer of each assignment someone is graded on, first in the queue
        wanted = sorted({job.assignment for job in job_list})
        job_list[:0] = [_make_job(work, len(job_list) + i, REFERENCE_STUDENT, name, course,
                                  source, sources[name], template_db, settings, None, None)
                        for i, name in enumerate(wanted)]
        n_done = [0]

        def progress(job: Job) -> None:
            n_done[0] += 1
            who = "model answer" if job.reference else job.student
            echo(f"  [{n_done[0]}/{len(job_list)}] {who}/{job.assignment} "
                 f"{job.seconds:.1f} s" + (" (over budget: stopped)" if job.over_budget else ""))

        run_all(job_list, jobs, on_done=progress)

        references = {}
        for job in job_list:
            if job.reference:
                src = sources[job.assignment]
                facts = JobFacts.from_events(job.events())
                try:
                    if job.over_budget:
                        raise ReferenceError_(f"the model answer ran past the "
                                              f"{settings['notebook_timeout']:g} s budget")
                    references[job.assignment] = reference_records(facts, src.tests)
                except ReferenceError_ as exc:
                    raise GradeError(f"{job.assignment}: {exc}; see "
                                     f"{job.dir / 'log.txt'}") from None
        grading_notes = [
            f"{name}: test cells {', '.join(gid for (_, gid), recs in ref.items() if not recs)} "
            "are decided in the kernel only (their checks publish no records: see "
            "course_tools/README.md, threat model)"
            for name, ref in references.items() if any(not recs for recs in ref.values())]
        (out / "reference.json").write_text(json.dumps(
            {name: {f"{nb}/{gid}": recs for (nb, gid), recs in ref.items()}
             for name, ref in references.items()}, indent=1) + "\n")
        for job in job_list:
            if not job.reference:
                _finish_job(job, sources[job.assignment], references[job.assignment], settings,
                            by_job[id(job)], out, root, db_url, *answered[id(job)])
    finally:
        if keep_work:
            echo(f"worker roots kept in {work}")
        else:
            remove_tree(work)
        remove_tree(staging)  # issue 12
    for r in rows:
        if not r.detail and r.notes:
            r.detail = "; ".join(r.notes)

    after = {"submissions": _digest_paths([original]), "course": _digest_paths(guarded),
             "course_lib": course_lib_digest()}
    problems = [f"{what} changed during grading ({', '.join(sorted(_changed(before[what], after[what])))[:300]})"
                for what in before if before[what] != after[what]]
    if gradebook_definition(db) != definition:
        problems.append("the gradebook's assignment definition changed during grading")
    grading = Grading(rows)
    grading.problems, grading.jobs = problems, jobs
    grading.notes = grading_notes
    lms.annotate(rows, staged)  # issue 12: LMS id, name, late, intake notes
    _write_outputs(out, rows)
    grading.notes += [staged.summary(), *staged.notes] + exports.write_lms_files(  # issue 12: HTML, Canvas, Moodle
        out, rows, staged, {n: s.hidden for n, s in sources.items()},
        canvas_gradebook=canvas_gradebook, roster=roster)
    grading.seconds = time.monotonic() - started
    _print_report(grading, out, ignored, echo)
    return grading


def _digest_paths(paths: list[Path]) -> dict[str, str]:
    """:func:`tree_digest` of folders and hashes of files, keyed by path."""
    out = {}
    for p in paths:
        if p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out.update({f"{p}/{k}": v for k, v in tree_digest(p).items()})
    return out


def course_lib_digest() -> dict[str, str]:
    """:func:`tree_digest` of the course_lib package the kernels import (byte-code caches
    aside): learner code could rewrite it, and every later kernel, another student's or the
    model answer's, would run the change.  The command cannot prevent that (no sandbox); it
    says so if it happened."""
    import course_lib

    return tree_digest(Path(course_lib.__file__).resolve().parent, skip=("__pycache__",))


def _changed(a: dict, b: dict) -> set[str]:
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _write_outputs(out: Path, reports: list[Report]) -> None:
    exports.write_grades_csv(out / "grades.csv", reports)  # issue 12: + lms_id, name, late
    (out / "results.json").write_text(json.dumps([asdict(r) for r in reports], indent=1) + "\n")
    for r in reports:
        path = out / "feedback" / r.student / f"{r.assignment}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_markdown(r))


def _print_report(grading: Grading, out: Path, ignored: list[str], echo) -> None:
    lines: list[str] = []
    width = max([len(r.student) for r in grading] + [7])
    for r in grading:
        line = (f"  {r.student:<{width}}  {r.assignment:<10} {_fmt(r.score):>5} / "
                f"{_fmt(r.max_score):<5} {r.status}")
        lines.append(line + (f": {r.detail}" if r.detail else ""))
    counts: dict[str, int] = {}
    for r in grading:
        counts[r.status] = counts.get(r.status, 0) + 1
    ran = [r for r in grading if r.seconds]
    lines += ["", f"{len({r.student for r in grading})} student(s), {len(grading)} row(s): "
              + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))]
    overruled = sorted(f"{r.student}/{r.assignment}" for r in grading
                       if any(OVERRULED in n for n in r.notes))
    if overruled:  # worth a look: checks changed or disabled in the notebook
        lines.append(f"test cells that passed in the notebook but not the grader's comparison: "
                     f"{', '.join(overruled)}")
    per_min = 60 * len(grading) / grading.seconds if grading.seconds else 0.0
    lines.append(f"throughput: {len(grading)} submissions in {grading.seconds:.1f} s with "
                 f"{grading.jobs} job(s) = {per_min:.1f} submissions/minute (the whole run; "
                 f"{len(ran)} autograded, plus the model answer, in "
                 f"{sum(r.seconds for r in ran):.0f} s of job time)")
    if ignored:
        lines.append(f"ignored (not a student folder or not an assignment): {', '.join(ignored)}")
    lines += [f"note: {n}" for n in grading.notes]
    if grading.problems:
        lines += [f"WARNING: {p}" for p in grading.problems]
    else:
        lines.append("verified: the submissions, the graded assignments' source, course_lib "
                     "and the gradebook's assignment definition are unchanged")
    lines.append(f"grades: {out / 'grades.csv'}  feedback: {out / 'feedback'}/  "
                 f"logs: {out / 'logs'}/  gradebook: {out / 'course' / 'gradebook.db'}")
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    echo("")
    for line in lines:
        echo(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.grade",
        description="Autograde SUBMISSIONS/<student>/<assignment>/<assignment>.ipynb with "
                    "nbgrader, on copies; write OUT/grades.csv, OUT/feedback/ and OUT/report.txt.")
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
    parser.add_argument("--jobs", "-j", type=int, default=1,
                        help="worker processes grading at once (default 1; grades do not "
                             "depend on it)")
    parser.add_argument("--cell-timeout", type=int, default=None, metavar="S",
                        help="seconds one cell may run before it is interrupted (default: "
                             "Execute.timeout in nbgrader_config.py)")
    parser.add_argument("--notebook-timeout", type=float, default=DEFAULT_NOTEBOOK_TIMEOUT,
                        metavar="S", help="seconds one student's assignment may take in all "
                                          f"(default {DEFAULT_NOTEBOOK_TIMEOUT})")
    parser.add_argument("--max-output", type=int, default=DEFAULT_MAX_OUTPUT, metavar="CHARS",
                        help=f"characters of output kept per cell (default {DEFAULT_MAX_OUTPUT:,};"
                             " ten times that per notebook)")
    parser.add_argument("--memory-limit", type=float, default=DEFAULT_MEMORY_LIMIT_GIB,
                        metavar="GIB", help="address space one notebook's kernel may use, in "
                        f"GiB (default {DEFAULT_MEMORY_LIMIT_GIB:g}; 0: no limit)")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the worker roots (for debugging the grader)")
    # issue 12: LMS downloads in, LMS files out
    parser.add_argument("--layout", choices=lms.LAYOUTS, default=None,
                        help="layout of SUBMISSIONS (default: detected)")
    parser.add_argument("--roster", type=Path, default=None, metavar="CSV",
                        help="LMS roster (Canvas gradebook export, Moodle grading worksheet, "
                             "or id,name CSV): every student on it gets a row")
    parser.add_argument("--canvas-gradebook", type=Path, default=None, metavar="EXPORT.csv",
                        help="Canvas gradebook export to fill in: writes "
                             "OUT/lms/canvas-<assignment>.csv for Canvas's import")
    args = parser.parse_args(argv)
    try:
        grading = grade(args.submissions, args.out, args.assignments, args.course,
                        jobs=args.jobs, cell_timeout=args.cell_timeout,
                        notebook_timeout=args.notebook_timeout, max_output=args.max_output,
                        memory_limit_gib=args.memory_limit, keep_work=args.keep_work,
                        layout=args.layout, roster=args.roster,
                        canvas_gradebook=args.canvas_gradebook)
    except GradeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if grading.problems or any(r.status == AUTOGRADE_ERROR for r in grading) else 0


if __name__ == "__main__":
    sys.exit(main())
