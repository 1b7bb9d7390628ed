"""One grading job: nbgrader's autograde of one student's one assignment, in a process of its
own, in an nbgrader root of its own.

The grade command (course_tools.grade) prepares for each job a folder (a *worker root*) that
holds the course's ``nbgrader_config.py``, a copy of the gradebook made by
``generate_assignment`` (so concurrent jobs never share an SQLite file), the assignment's
non-notebook source files and the student's (normalized) notebooks in
``submitted/<student>/<assignment>/``.  It then starts :func:`run_job` in a child process
(``os.fork`` where available, else ``python -m course_tools.worker JOB.json``) that

1. starts a new session (so the grader can kill the job's process group, and separately the
   kernel's, which jupyter_client starts in a session of its own);
2. limits the size of any file it or the kernel writes (``RLIMIT_FSIZE``) and, unless the
   job says 0, the address space of each process (``RLIMIT_AS``, ``job["memory_limit"]``
   bytes): a learner's cell that asks for more memory gets a ``MemoryError`` (numpy) or a
   ``RuntimeError`` (torch's allocator) instead of driving the machine into its OOM killer;
3. sends its stdout/stderr (and the kernel's) to the job's log;
4. runs nbgrader's ``Autograde`` with course_tools.preprocessors in its preprocessor lists
   and ``COURSE_CHECK_RECORDS=1`` in the kernel's environment;
5. writes ``result.json``: whether nbgrader finished, its error if not, and the scores
   nbgrader itself saved in the worker gradebook (a cross-check: the grade command scores
   from the per-cell facts in ``progress.jsonl``).

The wall-clock budget is enforced from outside (the grade command kills the job).
"""
from __future__ import annotations

import io
import json
import logging
import os
import sys
import traceback
from pathlib import Path

FILE_SIZE_LIMIT = 256 * 2**20
"""Largest file (bytes) a job or its kernel may write: the autograded notebook, with capped
outputs, is far smaller; a learner writing gigabytes to disk is stopped by SIGXFSZ."""


def _expected_noise(record: logging.LogRecord) -> bool:
    """Drop nbgrader's warning that a test cell's checksum changed: a test cell with hidden
    tests always differs from the release's copy, so it is said for every student; an edited
    test cell is reported by the intake (and restored by nbgrader) anyway."""
    return not (record.levelno == logging.WARNING
                and str(record.msg).startswith("Attribute '%s' for cell %s has changed!")
                and record.args and record.args[0] == "checksum")


def job_config(job: dict):
    """The traitlets config for one job: the course's ``nbgrader_config.py`` with the grading
    overrides (timeouts, output caps, preprocessor lists, worker root)."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput,
                                        IgnorePattern, LimitOutput, OverwriteCells,
                                        OverwriteKernelspec, SaveAutoGrades)

    from . import load_config
    from .preprocessors import GuardedExecute, NoPartialCredit, SetAsideStderr

    config = load_config(Path(job["course"]))
    config.CourseDirectory.root = job["root"]
    config.CourseDirectory.assignment_id = job["assignment"]
    config.CourseDirectory.student_id = job["student"]
    # nbgrader's lists with GuardedExecute for Execute and the two scoring fixes inserted
    # before SaveAutoGrades.  DeduplicateIds is left out: course_tools.intake already keeps
    # one cell per grade_id (nbgrader's version leaves an empty metadata dict that makes
    # CheckCellMetadata abort).
    config.Autograde.sanitize_preprocessors = [ClearOutput, OverwriteKernelspec, OverwriteCells,
                                               CheckCellMetadata]
    config.Autograde.autograde_preprocessors = [
        GuardedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SetAsideStderr,
        NoPartialCredit, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
    config.OverwriteCells.add_missing_cells = False  # intake puts missing cells back in place
    config.GuardedExecute.timeout = int(job["cell_timeout"])
    config.GuardedExecute.interrupt_on_timeout = True
    config.GuardedExecute.iopub_timeout = int(job.get("interrupt_grace", 5))
    config.GuardedExecute.progress_path = job["progress"]
    config.GuardedExecute.shutdown_kernel = "immediate"  # a graceful stop costs seconds
    config.GuardedExecute.startup_timeout = 30
    # Unix sockets in the job's folder: TCP ports picked at random collide when kernels
    # start at once on a busy machine ("Address already in use"; the kernel never answers)
    if os.name == "posix":
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(job["progress"]).parent / "kernel")
    config.GuardedExecute.max_cell_output = int(job["max_cell_output"])
    config.GuardedExecute.max_notebook_output = int(job["max_notebook_output"])
    config.LimitOutput.max_lines = int(job.get("max_lines", 1000))
    return config


def _autograde(job: dict) -> dict:
    """Run nbgrader's Autograde for the job; returns the result dict."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory

    from . import use_venv_path

    use_venv_path()
    config = job_config(job)
    logger = logging.getLogger(f"course_tools.worker.{os.getpid()}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s %(levelname)s] %(message)s"))
    handler.addFilter(_expected_noise)
    logger.addHandler(handler)
    import warnings

    warnings.filterwarnings("ignore", message=r".* not in session, add operation along ",
                            module=r"nbgrader\.api")  # nbgrader's own SQLAlchemy use
    result = {"ok": True, "error": "", "nbgrader_scores": {}}
    logger.info("job start: %s/%s", job["student"], job["assignment"])
    try:
        coursedir = CourseDirectory(config=config, log=logger)
        app = Autograde(coursedir=coursedir, config=config, log=logger)
        app.force = True
        app.create_student = True
        app.start()
    except BaseException:  # nbgrader raises NbGraderException, but also plain errors
        result["ok"] = False
        result["error"] = traceback.format_exc()[-4000:]
    logger.info("autograde done")
    try:
        with Gradebook(f"sqlite:///{Path(job['root']) / 'gradebook.db'}") as gb:
            try:
                sub = gb.find_submission(job["assignment"], job["student"])
                result["nbgrader_scores"] = {
                    f"{nb.name}/{g.name}": [None if g.auto_score is None else float(g.auto_score),
                                            float(g.max_score)]
                    for nb in sub.notebooks for g in nb.grades}
            except MissingEntry:
                pass
    except Exception:
        result["error"] += "\n(reading the worker gradebook failed)\n" + traceback.format_exc()[-2000:]
    return result


def run_job(job: dict, forked: bool = False) -> None:
    """Run one job (see the module docstring) and write ``job["result"]``.

    With ``forked=True`` this is a forked child of the grade command: it never returns
    (``os._exit``), so none of the parent's cleanup runs twice."""
    code = 0
    try:
        if forked:
            os.setsid()
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
            if job.get("memory_limit"):
                limit = int(job["memory_limit"])
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
        os.environ["COURSE_CHECK_RECORDS"] = "1"
        os.environ.setdefault("MPLBACKEND", "Agg")
        os.environ.pop("JPY_PARENT_PID", None)
        result = _autograde(job)
        tmp = job["result"] + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f)
        os.replace(tmp, job["result"])
    except BaseException:
        code = 3
        try:
            traceback.print_exc()
        except Exception:
            pass
    finally:
        if forked:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    if code:
        raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    """``python -m course_tools.worker JOB.json``: run one job (the fallback where there is no
    ``os.fork``; the grade command starts it in a new session)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m course_tools.worker JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    run_job(job, forked=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
