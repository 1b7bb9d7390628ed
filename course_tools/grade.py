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
the notebook past its budget: cells that finished still count); ``kernel_died`` (a cell
killed its kernel: a new one re-ran the cells before it and ran the later ones, which count);
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
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat

from . import (REPO_ROOT, assignments as course_assignments, copy_tree, course_dirs,
               load_config, remove_tree, run_nbgrader)
from . import exports, lms
from .feedback import Report, hidden_lines
from .intake import USABLE, extra_files, inspect_submission
from .integrity import (changed, course_lib_digest, course_lib_fingerprint, digest_paths,
                        gradebook_definition, kernels_course_lib_problem)
from .jobs import run_all
from .report import print_report, record_scores, write_outputs
from .preprocessors import role
from .protocol import JobResult, JobSpec, Limits, Sandbox, Status, encode
from .scoring import (JobFacts, ReferenceError_, cell_label, check_calls,
                      reference_records, score_cells)
from . import sandbox as sandboxing

GRADED, BLANK = Status.GRADED, Status.BLANK
TIMEOUT, KERNEL_DIED = Status.TIMEOUT, Status.KERNEL_DIED
BAD_STUDENT_ID, AUTOGRADE_ERROR = Status.BAD_STUDENT_ID, Status.AUTOGRADE_ERROR
STATUSES = tuple(Status)

MARKER = ".course-tools-grade"
"""File that marks a folder as this tool's output (so a re-run may clear it)."""
_OUTPUTS = ("course", "feedback", "logs", "grades.csv", "results.json", "report.txt",
            "reference.json", "lms")
_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")  # nbgrader reads ids as globs
CSV_FIELDS = exports.GRADES_FIELDS

DEFAULT_NOTEBOOK_TIMEOUT = 600
"""Seconds of wall clock one student's assignment may take, all cells together."""
DEFAULT_MAX_OUTPUT = 200_000
"""Characters of output kept per cell (ten times that per notebook)."""
DEFAULT_MEMORY_LIMIT_GIB = 4.0
"""Address space (GiB) one notebook's kernel may use; every course notebook runs in under 3
(with torch loaded).  A cell asking for more gets a MemoryError instead of the machine's OOM
killer choosing a victim among the jobs."""
DEFAULT_PROCESSES = 512
"""Tasks (processes and threads) one job's sandbox may hold; torch's thread pools need a few
dozen, a fork flood stops here."""
DEFAULT_SCRATCH_GIB = 1.0
"""Size of the sandbox's scratch space (a tmpfs: it counts as the job's memory too)."""
FILE_SIZE_LIMIT = 256 * 2**20
"""Largest file (bytes) a job or its kernel may write: the autograded notebook, with capped
outputs, is far smaller; a learner writing gigabytes to disk is stopped by SIGXFSZ."""
REFERENCE_STUDENT = "reference"


class GradeError(RuntimeError):
    """The grading run cannot start (bad paths, unknown assignment, broken source, a model
    answer that fails its own tests)."""


class Grading(list):
    """The :class:`~course_tools.feedback.Report` of each row (a list), plus ``problems``:
    files that changed during grading (should be empty), ``notes`` for the instructor,
    ``sandbox`` (the line naming it and its limits), ``seconds`` and ``jobs``."""
    problems: list[str]
    notes: list[str]
    sandbox: str
    interrupted: bool = False
    where: str = ""
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
        self.calls: dict = {}  # (notebook, grade_id): the test cell's check calls
        self.hidden: list[str] = []
        self.answers = sum(role(c) == "answer" for nb in self.release.values() for c in nb.cells)
        for n in self.notebooks:
            nb = nbformat.read(source_dir / f"{n}.ipynb", as_version=4)
            self.hidden += hidden_lines(nb)
            self.tests += [(n, c.metadata["nbgrader"]["grade_id"],
                            float(c.metadata["nbgrader"].get("points", 0)))
                           for c in nb.cells if role(c) == "test"]
            self.calls.update({(n, c.metadata["nbgrader"]["grade_id"]): check_calls(c.source)
                               for c in nb.cells if role(c) == "test"})
        self.max_score = sum(p for _, _, p in self.tests)


def _limits(course: Path, cell_timeout: int | None, notebook_timeout: float,
            max_output: int, memory_limit_gib: float = DEFAULT_MEMORY_LIMIT_GIB,
            processes: int = DEFAULT_PROCESSES,
            scratch_gib: float = DEFAULT_SCRATCH_GIB) -> Limits:
    if cell_timeout is None:
        cfg = load_config(course)
        cell_timeout = int(cfg.get("Execute", {}).get("timeout", 30) or 30)
    for name, v in (("cell timeout", cell_timeout), ("notebook timeout", notebook_timeout),
                    ("max output", max_output), ("processes", processes),
                    ("scratch", scratch_gib)):
        if not isinstance(v, (int, float)) or not v or v <= 0:
            raise GradeError(f"{name} must be a positive number, got {v!r}")
    if not isinstance(memory_limit_gib, (int, float)) or not 0 <= memory_limit_gib < 2**20 \
            or 0 < memory_limit_gib < 1:
        raise GradeError(f"memory limit must be 0 (none) or at least 1 GiB, got "
                         f"{memory_limit_gib!r}")
    memory, scratch = int(memory_limit_gib * 2**30), int(scratch_gib * 2**30)
    return Limits(cell_timeout=int(cell_timeout), notebook_timeout=float(notebook_timeout),
                  max_cell_output=int(max_output), max_notebook_output=10 * int(max_output),
                  memory=memory, job_memory=memory + scratch if memory else 0,
                  processes=int(processes), scratch=scratch, file_size=FILE_SIZE_LIMIT)


def _files(folder: Path) -> dict[str, str]:
    """The regular files under ``folder`` except notebooks, as a spec's ``{path: base64}``."""
    out = {}
    if folder.is_dir():
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(folder)
            if p.is_file() and not p.is_symlink() and p.suffix != ".ipynb" \
                    and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                out[rel.as_posix()] = encode(p.read_bytes())
    return out


def _make_spec(job_id: str, student: str, name: str, course: Path, src: "_Source",
               gradebook: bytes, limits: Limits, sandbox: Sandbox, fingerprint: str,
               notebooks: dict | None, student_dir: Path | None) -> JobSpec:
    """The self-contained job for one student's assignment (``notebooks``: the normalized
    notebooks) or, with ``notebooks=None``, for the model answer (the source notebooks)."""
    config = course / "nbgrader_config.py"
    source_files = _files(src.dir)
    if notebooks is None:  # the reference: the source notebooks themselves
        nbs = {n: json.loads((src.dir / f"{n}.ipynb").read_text(encoding="utf-8"))
               for n in src.notebooks}
        files = source_files
    else:
        nbs = {n: json.loads(nbformat.writes(nb)) for n, nb in notebooks.items()}
        files = {k: encode(v) for k, v in extra_files(student_dir / name)[0].items()}
    return JobSpec(job_id=job_id, student=student, assignment=name,
                   reference=notebooks is None, notebooks=nbs, files=files,
                   source_files=source_files, gradebook=encode(gradebook),
                   config=config.read_text(encoding="utf-8") if config.is_file() else "",
                   limits=limits, sandbox=sandbox, course_lib=fingerprint)


def _stop_words(result: JobResult, facts: JobFacts, limits: Limits) -> tuple[str, str, str]:
    """``(status, detail sentence, why later cells did not run)`` of a finished job."""
    ended = list(facts.by_index.values())
    box = result.sandbox
    if result.over_budget:
        where = cell_label(facts.running) if facts.running else "its start-up"
        budget = f"the notebook ran past its {limits.notebook_timeout:g} s budget"
        if box.process_cap_hits:
            return (Status.PROCESS_LIMIT, f"stopped in {where}: it hit the sandbox's cap of "
                    f"{limits.processes} processes and then {budget}",
                    f"the process cap, then {budget}, in {where}")
        return TIMEOUT, f"timed out in {where}: {budget}", f"{budget} in {where}"
    dead = [e for e in ended if e.get("status") == "dead"]
    slow = [e for e in ended if e.get("status") in ("timeout", "unresponsive")]
    if dead:
        where = cell_label(dead[0])
        if len(dead) > 1:
            where += f" (and {len(dead) - 1} more cell(s))"
        # a new kernel re-runs the cells that ran before and goes on (GuardedExecute); what
        # stopped it, if the later cells did not all run, is said too
        stuck = [e for e in slow if e.get("status") == "unresponsive"]
        later = "a new kernel ran the cells after it (those before it run again first)"
        if any(e.get("status") == "not_run" for e in ended):
            later = (f"a new kernel ran the cells after it until {cell_label(stuck[0])} ran past the "
                     f"{limits.cell_timeout} s limit per cell and ignored the interrupt, so later "
                     "cells did not run" if stuck else "later cells did not run")
        if box.oom_kills:
            return (Status.MEMORY_LIMIT, f"stopped in {where}: the notebook used more than "
                    f"the {limits.job_memory / 2**30:g} GiB of memory a job may use, so the "
                    f"sandbox ended its kernel; {later}",
                    f"the job's memory limit was reached in {where}")
        if _scratch_full(box, limits):
            return (Status.DISK_LIMIT, f"kernel died in {where} after filling the sandbox's "
                    f"{limits.scratch / 2**30:g} GiB scratch space; {later}",
                    dead[-1].get("reason", ""))
        return (KERNEL_DIED, f"kernel died in {where}; {later}", dead[-1].get("reason", ""))
    if slow:
        first = slow[0]
        how = ("ignored the interrupt, so the kernel was stopped and later cells did not run"
               if first.get("status") == "unresponsive" else "was interrupted")
        more = f" (and {len(slow) - 1} more cell(s))" if len(slow) > 1 else ""
        status, cap = TIMEOUT, ""
        if box.process_cap_hits:
            status, cap = (Status.PROCESS_LIMIT,
                           f" after hitting the sandbox's cap of {limits.processes} processes")
        elif _scratch_full(box, limits):
            status, cap = (Status.DISK_LIMIT, f" after filling the sandbox's "
                           f"{limits.scratch / 2**30:g} GiB scratch space")
        return (status, f"timed out in {cell_label(first)}{more}{cap}: it ran past the "
                f"{limits.cell_timeout} s limit per cell and {how}",
                first.get("reason", ""))
    if result.refused:
        return AUTOGRADE_ERROR, f"not graded: {result.refused}", "the job was refused"
    if not result.ok and not result.error:
        where = f" in {cell_label(facts.running)}" if facts.running else ""
        code = result.exit_code
        how = (f"killed by signal {-code}" if code and code < 0 else f"exit code {code}")
        return (AUTOGRADE_ERROR, f"grading stopped abnormally{where} ({how}); see the log",
                f"grading stopped abnormally{where}")
    if not result.ok:
        lines = [ln.strip() for ln in result.error.splitlines() if ln.strip()]
        return (AUTOGRADE_ERROR, f"nbgrader could not grade this notebook "
                f"({(lines[-1] if lines else 'unknown error')[:300]})", "nbgrader failed")
    return GRADED, "", ""


def _scratch_full(box, limits: Limits) -> bool:
    """Did the job fill its scratch space?  (A write that fails part-way leaves a few tens
    of MiB unused, so 95 % counts as full.)"""
    return bool(box.peak_scratch) and box.peak_scratch >= 0.95 * limits.scratch


def _sandbox_notes(result: JobResult, limits: Limits) -> list[str]:
    """Limits a job reached without being stopped by them (said in its detail)."""
    box, notes = result.sandbox, []
    if box.process_cap_hits:
        notes.append(f"it reached the sandbox's cap of {limits.processes} processes (new "
                     "processes or threads failed)")
    if box.memory_events and not box.oom_kills:
        notes.append(f"it reached the job's memory cap of {limits.job_memory / 2**30:g} GiB "
                     "(allocations failed)")
    elif box.oom_kills:
        notes.append(f"it used more than the job's {limits.job_memory / 2**30:g} GiB of memory:"
                     f" the sandbox killed {box.oom_kills} of its processes")
    if _scratch_full(box, limits):
        notes.append(f"it filled the sandbox's {limits.scratch / 2**30:g} GiB scratch space "
                     "(writes failed: no space left on device)")
    if box.survivors:
        notes.append(f"{box.survivors} process(es) it started were still running when its "
                     "kernel ended, and were killed")
    return notes


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


def answer_error_notes(errors, changed: list[str]) -> list[str]:
    """The notes on answer cells that raised (``errors``: their grade ids), told apart by the intake's
    ``changed`` cells: one left as released (a test-yourself stub's ``raise NotImplementedError()``) was not
    answered; only a changed one raised an error of the learner's."""
    mine = {g.rsplit("/", 1)[-1] for g in changed}
    stubs, raised = [g for g in errors if g not in mine], [g for g in errors if g in mine]
    return ([f"answer cell(s) {', '.join(stubs)} were not answered (still the release's stub)"] if stubs else []) + (
        [f"answer cell(s) {', '.join(raised)} raised an error (its message: the feedback's 'Answer cells that "
         "raised an error')"] if raised else [])


def _finish_job(spec: JobSpec, result: JobResult, src: "_Source", reference: dict,
                limits: Limits, report: Report, out: Path, root: Path, db_url: str,
                changed_cells: list[str], added: int) -> None:
    """Score a student's job, record it in the master gradebook, keep its log and notebook.

    ``changed_cells``/``added``: the intake's answer cells that differ from the release and
    code cells not in it (a finished notebook with neither and no points is ``blank``)."""
    facts = JobFacts.from_events(result.events)
    status, sentence, why = _stop_words(result, facts, limits)
    report.seconds = result.seconds
    report.cells, report.answer_errors, notes = score_cells(
        facts, src.tests, reference, src.hidden, limits.cell_timeout, why, src.calls)
    if status == GRADED:
        blank = blank_words(src.answers, changed_cells, added, report.cells)
        if blank:
            status, sentence = BLANK, blank
    report.status = status
    report.notes += notes + _sandbox_notes(result, limits)
    if status == GRADED:  # a test may pass all the same
        report.notes += answer_error_notes(report.answer_errors, changed_cells)
    if result.sandbox.kind == Sandbox.NONE:
        report.notes.append("graded without a sandbox (--sandbox none)")
    report.nbgrader_scores = {k: v[0] for k, v in result.nbgrader_scores.items()
                              if isinstance(v, list) and v}
    report.score = sum(c.score for c in report.cells)
    report.detail = "; ".join(x for x in [sentence, *report.notes] if x)
    log = out / "logs" / spec.student / f"{spec.assignment}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(result.log + (f"\n[nbgrader error]\n{result.error}" if result.error else ""),
                   encoding="utf-8")
    graded = root / "autograded" / spec.student / spec.assignment
    for name, nb in result.autograded.items():
        if name in src.notebooks:
            graded.mkdir(parents=True, exist_ok=True)
            try:
                nbformat.write(nbformat.from_dict(nb), graded / f"{name}.ipynb")
            except Exception:  # noqa: BLE001 - a notebook nbformat cannot write is not kept
                report.notes.append(f"the autograded {name}.ipynb could not be kept")
    record_scores(db_url, report)


def grade(submissions: Path, out: Path, names: list[str] | None = None,
          course: Path = REPO_ROOT, echo=None, *, jobs: int = 1,
          cell_timeout: int | None = None,
          notebook_timeout: float = DEFAULT_NOTEBOOK_TIMEOUT,
          max_output: int = DEFAULT_MAX_OUTPUT,
          memory_limit_gib: float = DEFAULT_MEMORY_LIMIT_GIB,
          processes: int = DEFAULT_PROCESSES,
          sandbox: str = Sandbox.BWRAP, scheduler: str | None = None,
          progress_bar: bool | None = None, layout: str | None = None,
          roster: Path | None = None, canvas_gradebook: Path | None = None) -> Grading:
    """Grade every student folder in ``submissions`` for ``names`` (default: the course's
    assignments that some student submitted) and write the results under ``out``.

    Args:
        jobs: worker processes grading at once (results do not depend on it).
        cell_timeout: seconds per cell (default: ``Execute.timeout`` of the course config).
        notebook_timeout: seconds of wall clock per student and assignment.
        max_output: characters of output kept per cell (ten times that per notebook).
        memory_limit_gib: address space one notebook's kernel may use, in GiB (0: no limit);
            the job as a whole (where a cgroup can be made) that plus its scratch space.
        processes: tasks one job's sandbox may hold.
        sandbox: ``"bwrap"`` (learner code in bubblewrap; the default) or ``"none"``.
        scheduler: a Dask scheduler's address: run the jobs on its workers
            (course_tools.cluster) instead of ``jobs`` local processes.
        progress_bar: show a tqdm bar on stderr (default: when stderr is a terminal).

    Returns a :class:`Grading`: one :class:`~course_tools.feedback.Report` per student and
    assignment.  Raises :class:`GradeError` when grading cannot start (the sandbox cannot be
    had included) or the model answer fails its own tests.
    """
    started = time.monotonic()
    submissions, out, course = Path(submissions).resolve(), Path(out).resolve(), Path(course).resolve()
    echo = echo or (lambda *a: print(*a, flush=True))
    if not isinstance(jobs, int) or jobs < 1:
        raise GradeError(f"--jobs must be a whole number >= 1, got {jobs!r}")
    limits = _limits(course, cell_timeout, notebook_timeout, max_output, memory_limit_gib,
                     processes)
    try:
        sandbox = Sandbox(sandbox)
    except ValueError:
        raise GradeError(f"--sandbox must be one of {', '.join(Sandbox)}, got {sandbox!r}") from None
    if not submissions.exists():
        raise GradeError(f"SUBMISSIONS {submissions} does not exist")
    box_words = _sandbox_words(sandbox, limits)  # refuses (nothing written) without bwrap
    if problem := kernels_course_lib_problem(sandbox == Sandbox.BWRAP):  # a worker refuses a job for it too
        raise GradeError(problem)
    known = course_assignments(course)
    # LMS intake: a folder or .zip in any layout -> <student>/<assignment>/ (course_tools.lms)
    original, staging = submissions, Path(tempfile.mkdtemp(prefix="course-intake-"))
    try:
        try:
            staged = lms.stage(submissions, staging, known, layout=layout, assignments=names,
                               roster=roster)
            if canvas_gradebook is not None:  # refused now, not after an hour of grading
                exports.read_canvas_export(canvas_gradebook)
        except (lms.LMSError, exports.ExportError) as exc:
            raise GradeError(str(exc)) from None
        client = None
        if scheduler:
            from .cluster import ClusterError, connect
            try:
                client = connect(scheduler)
            except ClusterError as exc:
                raise GradeError(str(exc)) from None
        return _grade_staged(original, staged, out, names, course, echo, started, jobs=jobs,
                             limits=limits, sandbox=sandbox, box_words=box_words,
                             client=client, scheduler=scheduler, progress_bar=progress_bar,
                             known=known, roster=roster, canvas_gradebook=canvas_gradebook)
    finally:
        remove_tree(staging)


def _grade_staged(original: Path, staged, out: Path, names, course: Path, echo, started: float,
                  *, jobs: int, limits: Limits, sandbox: Sandbox, box_words: str, client,
                  scheduler, progress_bar, known, roster, canvas_gradebook) -> Grading:
    """:func:`grade` once the submissions are staged in nbgrader's layout (``staged.root``)."""
    submissions, names = staged.root, names or staged.assignments
    echo(staged.summary())
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
    before = {"submissions": digest_paths([original]), "course": digest_paths(guarded),
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
    gradebook = db.read_bytes()
    fingerprint = course_lib_fingerprint()
    run_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"

    where = (f"on the Dask cluster at {scheduler}" if scheduler else f"with {jobs} job(s)")
    echo(f"Grading {', '.join(names)} for {len(students)} student(s) from {submissions} "
         f"{where} (cell timeout {limits.cell_timeout} s, notebook budget "
         f"{limits.notebook_timeout:g} s, memory "
         + (f"{limits.memory / 2**30:g} GiB" if limits.memory else "not limited")
         + f" per process); {box_words}")
    rows: list[Report] = []
    specs: list[JobSpec] = []
    by_job: dict[str, Report] = {}
    answered: dict[str, tuple[list[str], int]] = {}  # job_id: intake's (changed, added)

    sent_by = staged.by_student()  # what the LMS download held for each row

    def job_id() -> str:
        return f"{run_id}-{len(specs):06d}"
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
            sent = sent_by.get((student, name))
            if sent is not None and sent.roster_only:
                report.status = Status.MISSING
                report.detail = "no submission (on the roster, nothing in the download)"
                continue
            intake = inspect_submission(student_dir, name, src.release,
                                        sent.uploaded() if sent is not None else None)
            report.status, report.notes = intake.status, intake.notes
            report.detail = intake.detail
            if intake.status != USABLE:
                continue
            spec = _make_spec(job_id(), student, name, course, src, gradebook, limits,
                              sandbox, fingerprint, intake.notebooks, student_dir)
            by_job[spec.job_id] = report
            answered[spec.job_id] = (intake.changed, intake.added)
            specs.append(spec)

    # the model answer of each assignment someone is graded on, first in the queue
    wanted = sorted({spec.assignment for spec in specs})
    specs[:0] = [_make_spec(f"{run_id}-ref{i:03d}", REFERENCE_STUDENT, name, course,
                            sources[name], gradebook, limits, sandbox, fingerprint, None, None)
                 for i, name in enumerate(wanted)]
    bar = _Progress(len(specs), echo, progress_bar)
    try:
        if client is not None:
            from .cluster import run_on_cluster
            results, interrupted = run_on_cluster(client, specs, on_done=bar.done)
        else:
            results, interrupted = run_all(specs, jobs, on_done=bar.done)
    finally:
        bar.close()
        if client is not None:
            client.close()
    missing = [spec for spec in specs if spec.job_id not in results]
    if interrupted or missing:
        interrupted = True
        for spec in missing:
            if not spec.reference:
                r = by_job[spec.job_id]
                r.status = Status.INTERRUPTED
                r.detail = "not graded: grading was interrupted before this notebook was graded"

    references = {}
    for spec in specs:
        if spec.reference and spec.job_id in results:
            src, result = sources[spec.assignment], results[spec.job_id]
            facts = JobFacts.from_events(result.events)
            try:
                if result.over_budget:
                    raise ReferenceError_(f"the model answer ran past the "
                                          f"{limits.notebook_timeout:g} s budget")
                if result.refused:
                    raise ReferenceError_(f"the model answer was not graded: {result.refused}")
                if not result.ok and result.error:
                    raise ReferenceError_(result.error.strip().splitlines()[-1][:300])
                references[spec.assignment] = reference_records(facts, src.tests)
            except ReferenceError_ as exc:
                log = out / "logs" / REFERENCE_STUDENT / f"{spec.assignment}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(result.log + "\n" + result.error, encoding="utf-8")
                raise GradeError(f"{spec.assignment}: {exc}; see {log}") from None
    grading_notes = [
        f"{name}: test cells {', '.join(gid for (_, gid), recs in ref.items() if not recs)} "
        "are decided in the kernel only (their checks publish no records: see "
        "course_tools/README.md, threat model)"
        for name, ref in references.items() if any(not recs for recs in ref.values())]
    (out / "reference.json").write_text(json.dumps(
        {name: {f"{nb}/{gid}": recs for (nb, gid), recs in ref.items()}
         for name, ref in references.items()}, indent=1) + "\n")
    for spec in specs:
        if not spec.reference and spec.job_id in results:
            if spec.assignment not in references:  # interrupted before its model answer
                r = by_job[spec.job_id]
                r.status = Status.INTERRUPTED
                r.detail = "not graded: grading was interrupted before the model answer ran"
                continue
            _finish_job(spec, results[spec.job_id], sources[spec.assignment],
                        references[spec.assignment], limits, by_job[spec.job_id], out, root,
                        db_url, *answered[spec.job_id])
    for r in rows:
        if not r.detail and r.notes:
            r.detail = "; ".join(r.notes)

    after = {"submissions": digest_paths([original]), "course": digest_paths(guarded),
             "course_lib": course_lib_digest()}
    problems = [f"{what} changed during grading ({', '.join(sorted(changed(before[what], after[what])))[:300]})"
                for what in before if before[what] != after[what]]
    if gradebook_definition(db) != definition:
        problems.append("the gradebook's assignment definition changed during grading")
    left = sandboxing.leftover_cgroups(f"course-grade-{run_id}-")
    if left:
        problems.append(f"{len(left)} job cgroup(s) were left behind (their processes were "
                        "killed now)")
        sandboxing.destroy_leftovers(f"course-grade-{run_id}-")
    grading = Grading(rows)
    grading.problems, grading.jobs = problems, jobs
    grading.interrupted = interrupted
    grading.where = where
    grading.notes = grading_notes
    grading.sandbox = box_words
    lms.annotate(rows, staged)  # LMS id, name, late, intake notes
    write_outputs(out, rows)
    grading.notes += [staged.summary(), *staged.notes] + exports.write_lms_files(  # HTML feedback, Canvas, Moodle
        out, rows, staged, {n: s.hidden for n, s in sources.items()},
        canvas_gradebook=canvas_gradebook, roster=roster)
    grading.seconds = time.monotonic() - started
    print_report(grading, out, ignored, echo)
    return grading


class _Progress:
    """One line per finished job (``echo``) and, at a terminal, a tqdm bar with the jobs
    done, failed and per minute."""

    def __init__(self, total: int, echo, show: bool | None):
        from tqdm import tqdm

        self.total, self.echo, self.n, self.failed = total, echo, 0, 0
        self.start = time.monotonic()
        self.bar = tqdm(total=total, unit="job", desc="grading", dynamic_ncols=True,
                        disable=(not sys.stderr.isatty()) if show is None else not show)

    def done(self, spec: JobSpec, result: JobResult) -> None:
        self.n += 1
        if result.refused or not result.ok or result.over_budget:
            self.failed += 1
        who = "model answer" if spec.reference else spec.student
        line = (f"  [{self.n}/{self.total}] {who}/{spec.assignment} {result.seconds:.1f} s"
                + (" (over budget: stopped)" if result.over_budget else "")
                + (f" (not run: {result.refused})" if result.refused else ""))
        if self.bar.disable:
            self.echo(line)
        else:
            self.bar.write(line)
        minutes = max(time.monotonic() - self.start, 1e-9) / 60
        self.bar.set_postfix(failed=self.failed, per_min=f"{self.n / minutes:.1f}")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _sandbox_words(sandbox: Sandbox, limits: Limits) -> str:
    """One line naming the sandbox and its limits (raises :class:`GradeError`, one line,
    when the sandbox cannot be had here)."""
    if sandbox == Sandbox.NONE:
        return ("sandbox: none (--sandbox none): learner code runs with this user's powers, "
                "its files and its network, and processes it starts may outlive grading")
    try:
        version = sandboxing.probe()
    except sandboxing.SandboxUnavailable as exc:
        raise GradeError(str(exc)) from None
    group = sandboxing.JobCgroup.create(f"course-grade-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}",
                                        limits.processes, limits.job_memory)
    kind = group.kind
    group.destroy()
    per_job = (f"per job {limits.processes} processes and "
               + (f"{limits.job_memory / 2**30:g} GiB of memory" if limits.job_memory else
                  "no memory cap") + f" (cgroup {kind})") if kind else (
        f"no cgroup can be made here, so per process only: {limits.processes} processes per "
        "user (RLIMIT_NPROC; not enforced for root)")
    return (f"sandbox: {version}: no network, a file system of the Python environment and "
            f"course_lib (read-only) and {limits.scratch / 2**30:g} GiB of scratch space; "
            f"{per_job}; " + (f"{limits.memory / 2**30:g} GiB of address space per process"
                              if limits.memory else "no address-space cap"))


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
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="grade on the Dask cluster whose scheduler is at ADDRESS "
                             "(tcp://HOST:8786) instead of --jobs local processes")
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES, metavar="N",
                        help=f"processes and threads one job's sandbox may hold (default "
                             f"{DEFAULT_PROCESSES})")
    parser.add_argument("--sandbox", choices=[str(s) for s in Sandbox], default=str(Sandbox.BWRAP),
                        help="where learner code runs: bwrap (bubblewrap, the default) or none "
                             "(no sandbox: only for notebooks you trust)")
    # LMS downloads in, LMS files out (course_tools.lms, course_tools.exports)
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
                        memory_limit_gib=args.memory_limit, processes=args.processes,
                        sandbox=args.sandbox, scheduler=args.scheduler,
                        layout=args.layout, roster=args.roster,
                        canvas_gradebook=args.canvas_gradebook)
    except GradeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if grading.interrupted:
        return 130
    return 1 if grading.problems or any(r.status == AUTOGRADE_ERROR for r in grading) else 0


if __name__ == "__main__":
    sys.exit(main())
