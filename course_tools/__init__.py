"""Instructor tooling for "Transformers by counting": release and grade, both through nbgrader.

    python -m course_tools.release [ASSIGNMENT ...]          # solutions/ -> notebooks/
    python -m course_tools.grade SUBMISSIONS --out OUT       # autograde, grades.csv, feedback

A *course root* is a folder holding ``nbgrader_config.py``, ``solutions/<assignment>/`` (the
nbgrader source, answers and hidden tests included) and ``notebooks/<assignment>/`` (the
student release).  The repository is one; tests build small throwaway ones.

Both tools run nbgrader's own converters (``GenerateAssignment`` in-process, ``Autograde`` in
one worker process per submission), always in separate, disposable nbgrader roots (a
temporary folder, or ``OUT/course``), so they never write a gradebook or ``autograded/`` into
the repository.  The course's ``nbgrader_config.py`` is loaded so its settings (code stub,
execution timeout) apply; only ``CourseDirectory.root`` is replaced.  Nothing here holds
course content.  README.md in this folder describes grading: its guarantees, its modules
(``grade``, ``intake``, ``jobs``, ``worker``, ``preprocessors``, ``scoring``, ``feedback``)
and its threat model.
"""
from __future__ import annotations

import io
import logging
import os
import shutil
import sys
import tempfile
import traceback
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository this package lives in (the default course root)."""

IGNORED = (".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store")
"""Names never copied into an nbgrader root (editor and interpreter droppings)."""


def course_dirs(course: Path) -> tuple[str, str]:
    """``(source_directory, release_directory)`` of a course root, read from its config
    (``solutions`` and ``notebooks`` for this course)."""
    cfg = load_config(course)
    cd = cfg.get("CourseDirectory", {})
    return cd.get("source_directory", "source"), cd.get("release_directory", "release")


def assignments(course: Path = REPO_ROOT) -> list[str]:
    """Sorted names of the assignments in a course root: folders of the source directory
    that hold at least one ``.ipynb``."""
    source, _ = course_dirs(course)
    root = Path(course) / source
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.ipynb")))


def load_config(course: Path):
    """The traitlets ``Config`` of ``<course>/nbgrader_config.py`` (empty if there is none).

    Only the course's own file is read (not ``~/.jupyter``), so results do not depend on who
    runs the tools."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    path = Path(course) / "nbgrader_config.py"
    if not path.is_file():
        return Config()
    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def use_venv_path() -> None:
    """Put this interpreter's ``bin/`` first on ``PATH`` (idempotent, this process only).

    nbgrader's ``Gradebook`` runs the ``alembic`` *executable* to check the database schema,
    so it fails with FileNotFoundError when the virtualenv is not activated (``.venv/bin/
    python -m ...``, ``.venv/bin/pytest``).  Call this before opening a gradebook."""
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = bindir + (os.pathsep + path if path else "")


def open_gradebook(db_url: str):
    """nbgrader's ``Gradebook`` for ``db_url`` (use as a context manager)."""
    from nbgrader.api import Gradebook

    use_venv_path()
    return Gradebook(db_url)


@dataclass
class RunResult:
    """What one nbgrader converter run did: ``ok`` (no exception), its captured ``log`` and,
    on failure, the ``error`` traceback."""
    ok: bool
    log: str
    error: str = ""

    def last_error(self) -> str:
        """The most telling one-line reason for a failure, from the log and traceback."""
        lines = [ln.strip() for ln in (self.log + "\n" + self.error).splitlines()]
        errors = [ln for ln in lines if ln.startswith("[ERROR]") and "Please see the" not in ln
                  and "There was an error processing assignment" not in ln]
        for ln in errors:
            if "Error" in ln or "error" in ln.lower():
                return ln.removeprefix("[ERROR]").strip()[:300]
        tb = [ln for ln in lines if ln and not ln.startswith("[")]
        return (tb[-1] if tb else (errors[-1] if errors else "unknown error"))[:300]


def run_nbgrader(step: str, nbgrader_root: Path, course: Path, assignment: str,
                 student: str | None = None) -> RunResult:
    """Run one nbgrader converter in-process on ``nbgrader_root`` with ``course``'s config.

    Args:
        step: ``"generate_assignment"`` (with ``--force``) or ``"autograde"`` (with
            ``--force``, creating the student).
        nbgrader_root: the nbgrader course root to work in (its ``gradebook.db`` is used).
        course: the course root whose ``nbgrader_config.py`` supplies the settings.
        assignment: the assignment id.
        student: the student id (autograde only; exactly one student per call, so one bad
            notebook cannot abort other students' grading).

    Returns a :class:`RunResult`; exceptions from nbgrader are caught and reported there.
    """
    from nbgrader.converters import Autograde, GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    if step not in ("generate_assignment", "autograde"):
        raise ValueError(f"step must be 'generate_assignment' or 'autograde', got {step!r}")
    if step == "autograde" and not student:
        raise ValueError("autograde needs a student id")

    use_venv_path()
    config = load_config(course)
    config.CourseDirectory.root = str(Path(nbgrader_root).resolve())
    config.CourseDirectory.assignment_id = assignment
    if student:
        config.CourseDirectory.student_id = student

    buffer = io.StringIO()
    logger = logging.getLogger(f"course_tools.nbgrader.{id(buffer)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger.addHandler(handler)
    stderr = ""
    try:
        with _stderr_to_string() as captured, warnings.catch_warnings():
            # nbgrader's own SQLAlchemy usage warns on every autograde: noise, not news.
            warnings.filterwarnings("ignore", module=r"nbgrader\..*")
            warnings.filterwarnings("ignore", message=r".*not in session.*")
            try:
                coursedir = CourseDirectory(config=config, log=logger)
                if step == "generate_assignment":
                    app = GenerateAssignment(coursedir=coursedir, config=config, log=logger)
                    app.force = True
                    app.create_assignment = True
                else:
                    app = Autograde(coursedir=coursedir, config=config, log=logger)
                    app.force = True
                    app.create_student = True
                app.start()
            finally:
                stderr = captured()
    except Exception:  # nbgrader raises NbGraderException, but also plain errors
        return RunResult(False, _join_log(buffer.getvalue(), stderr), traceback.format_exc())
    finally:
        logger.removeHandler(handler)
    return RunResult(True, _join_log(buffer.getvalue(), stderr))


def _join_log(log: str, stderr: str) -> str:
    return log + (f"\n[stderr of nbgrader and its kernels]\n{stderr}" if stderr.strip() else "")


@contextmanager
def _stderr_to_string():
    """Send file descriptor 2 (this process's and child kernels' stderr) to a temporary
    file for the duration; yields a function returning what was written."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        text = []

        def read() -> str:
            if not text:
                sys.stderr.flush()
                tmp.seek(0)
                text.append(tmp.read().decode("utf-8", "replace"))
            return text[0]
        try:
            yield read
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a folder's contents (not permissions or times), skipping :data:`IGNORED`."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*IGNORED),
                    copy_function=shutil.copyfile, dirs_exist_ok=True)


def remove_tree(path: Path) -> None:
    """Delete a folder that nbgrader may have made read-only."""
    import stat

    def retry(func, p, _exc_info):
        for q in (os.path.dirname(p), p):
            os.chmod(q, os.stat(q).st_mode | stat.S_IRWXU)
        func(p)

    if Path(path).exists():
        shutil.rmtree(path, onerror=retry)  # onerror: Python 3.11 (onexc is 3.12+)
