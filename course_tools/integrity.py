"""Hashes the grade command takes before and after grading, to say that nothing it guards
changed (the submissions, the assignments' source, course_lib, the gradebook's definition),
and the fingerprint of course_lib a job must run against."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from pathlib import Path


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


def digest_paths(paths: list[Path]) -> dict[str, str]:
    """:func:`tree_digest` of folders and hashes of files, keyed by path."""
    out = {}
    for p in paths:
        if p.is_file():
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out.update({f"{p}/{k}": v for k, v in tree_digest(p).items()})
    return out


def changed(a: dict, b: dict) -> set[str]:
    """Keys whose value differs between two digests (or that only one has)."""
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


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


def course_lib_digest() -> dict[str, str]:
    """:func:`tree_digest` of the course_lib package the kernels import (byte-code caches
    aside).  Kernels see it read-only in the sandbox; without one (``--sandbox none``)
    learner code could rewrite it for every later kernel, and the grade command says so."""
    import course_lib

    return tree_digest(Path(course_lib.__file__).resolve().parent, skip=("__pycache__",))


@functools.cache
def kernels_course_lib(sandboxed: bool) -> Path | None:
    """The folder a kernel this Python environment starts imports course_lib from (None: it cannot import it):
    not this process's working directory, and, in the sandbox (``sandboxed``), without ``PYTHONPATH``, which the
    sandbox clears.  Two checkouts sharing one environment may differ from this process's own course_lib."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not sandboxed or k != "PYTHONPATH"}
    probe = subprocess.run([sys.executable, "-c", "import course_lib, os; print(os.path.dirname("
                            "os.path.realpath(course_lib.__file__)))"], cwd="/", env=env, capture_output=True,
                           text=True, timeout=120)
    return Path(probe.stdout.strip()) if probe.returncode == 0 else None


def kernels_course_lib_problem(sandboxed: bool) -> str:
    """Why kernels here would not import this process's course_lib ("" if they do): the records they publish
    would come from other checks, and the sandbox shows kernels only this course_lib's folder."""
    import sys

    import course_lib

    mine, theirs = Path(course_lib.__file__).resolve().parent, kernels_course_lib(sandboxed)
    if theirs == mine:
        return ""
    found = f"import course_lib from {theirs}" if theirs else "cannot import course_lib"
    other = theirs.parent if theirs else "the checkout it holds"
    return (f"kernels of this Python environment ({sys.prefix}) {found}, not this grader's {mine}: grade from "
            f"{other}, or give this checkout an environment of its own (make .venv/.installed in {mine.parent}); "
            "installing it into this one would move every checkout that shares it")


def course_lib_fingerprint() -> str:
    """One sha256 of :func:`course_lib_digest`: a job spec carries the grade command's, and
    a worker whose own differs refuses the job."""
    return hashlib.sha256(json.dumps(course_lib_digest(), sort_keys=True).encode()).hexdigest()
