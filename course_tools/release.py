"""Regenerate the student release ``notebooks/`` from ``solutions/`` with nbgrader.

    python -m course_tools.release                 # every assignment
    python -m course_tools.release lesson1 lesson2

Each assignment goes through nbgrader's ``generate_assignment --force`` in a temporary
nbgrader root (so no ``gradebook.db`` or other droppings land in the repository); the result
is stripped of outputs and execution counts, written with nbformat's canonical layout, and
mirrored into ``notebooks/<assignment>/`` (files that did not change are not rewritten, files
no longer in the release are removed).  Running it twice changes nothing.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tempfile
from pathlib import Path

import nbformat

from . import REPO_ROOT, assignments, copy_tree, course_dirs, run_nbgrader


class ReleaseError(RuntimeError):
    """nbgrader could not generate an assignment (the message carries nbgrader's log)."""


def normalize(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip what a run leaves behind: outputs, execution counts and JupyterLab's per-cell
    ``execution`` timing metadata.  Returns the same notebook, changed in place."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    return nb


LANGUAGE_INFO = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                 "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                 "pygments_lexer": "ipython3", "version": "3.11"}
"""The release's ``language_info``: what the course's kernel (ipykernel, Python 3.11) reports,
so that JupyterLab, which writes the kernel's ``language_info`` into a notebook it opens, finds
nothing to change (only the patch level of ``version`` may differ)."""

EXERCISES = REPO_ROOT / "course_lib" / "checks" / "exercises.json"
"""Where :func:`exercise_table` is written (read by ``course_lib.tutor``)."""

_HEADING = re.compile(r"^(#{2,3}) (.*)$")
_EXERCISE = re.compile(r"^Exercise (\d+)\b")
_QUESTION = re.compile(r"^\*\*(\d+)\.\*\*")
_LEAD = re.compile(r"^\*\*([A-Z][^*]{2,40})\.\*\*")


def _visible(source: str) -> str:
    return source.split("### BEGIN HIDDEN TESTS")[0]


def _parse(source: str):
    text = "\n".join(ln for ln in source.splitlines()
                     if not ln.lstrip().startswith(("%", "!", "###")))
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def exercise_table(nb: nbformat.NotebookNode) -> dict:
    """For one source notebook: ``{"answers": {name: label}, "checks": {check function:
    {"label": label, "hidden": bool}}}``.  A label is the exercise as the notebook names it
    (``"Exercise 1"``, ``"Test yourself 2"``, ``"The recap exercise"``, a bold lead such as
    ``"Recap question"``): the heading above the answer cell.  An answer's names are those its test cell passes to a check that the answer
    cell defines; ``hidden`` says whether the test cell has hidden tests."""
    label, in_questions = None, False
    defined: dict[str, str | None] = {}
    answers: dict[str, str] = {}
    checks: dict[str, dict] = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                heading = _HEADING.match(line)
                if heading:
                    title = heading.group(2).strip()
                    exercise = _EXERCISE.match(title)
                    if exercise:
                        label = f"Exercise {exercise.group(1)}"
                    elif heading.group(1) == "##":
                        in_questions = title.lower().startswith("test yourself")
                        label = "The recap exercise" if title.lower().startswith(
                            "recap exercise") else None
                elif in_questions and _QUESTION.match(line):
                    label = f"Test yourself {_QUESTION.match(line).group(1)}"
                elif _LEAD.match(line):  # a question in bold, e.g. "**Recap question.**"
                    label = _LEAD.match(line).group(1)
        elif meta.get("solution") and not meta.get("grade"):
            tree = _parse(cell.source)
            for node in (tree.body if tree else []):
                if isinstance(node, ast.FunctionDef):
                    defined[node.name] = label
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            defined[target.id] = label
        elif meta.get("grade"):
            tree = _parse(_visible(cell.source))
            hidden = "BEGIN HIDDEN TESTS" in cell.source
            for node in (ast.walk(tree) if tree else ()):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr.startswith("check_"):
                    names = [a.id for a in (*node.args, *(k.value for k in node.keywords))
                             if isinstance(a, ast.Name) and a.id in defined]
                    for n in names:
                        if defined[n]:
                            answers[n] = defined[n]
                    own = next((defined[n] for n in names if defined[n]), label)
                    checks[node.func.attr] = {"label": own, "hidden": hidden,
                                              **({"keywords": sorted(k.arg for k in node.keywords if k.arg)}
                                                 if node.keywords else {})}
    return {"answers": dict(sorted(answers.items())), "checks": dict(sorted(checks.items()))}


def write_exercise_table(course: Path, names: list[str], path: Path = EXERCISES) -> bool:
    """Update ``path`` with :func:`exercise_table` of each assignment in ``names`` (others are
    kept); return True if the file changed."""
    source, _ = course_dirs(course)
    try:
        tables = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        tables = {}
    for name in names:
        nb = nbformat.read(course / source / name / f"{name}.ipynb", as_version=4)
        tables[name] = exercise_table(nb)
    text = json.dumps(dict(sorted(tables.items())), indent=1, ensure_ascii=False) + "\n"
    if Path(path).is_file() and Path(path).read_text(encoding="utf-8") == text:
        return False
    Path(path).write_text(text, encoding="utf-8")
    return True


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> bool:
    """Write ``nb`` in nbformat's canonical JSON; return True if the file changed."""
    text = nbformat.writes(nb)
    text += "" if text.endswith("\n") else "\n"
    path = Path(path)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def _mirror(src: Path, dst: Path) -> list[Path]:
    """Make ``dst`` hold exactly ``src``'s files; return the paths that changed."""
    changed = []
    wanted = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    for rel in sorted(wanted):
        data = (src / rel).read_bytes()
        target = dst / rel
        if not (target.is_file() and target.read_bytes() == data):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            changed.append(target)
    if dst.is_dir():
        for p in sorted(dst.rglob("*"), reverse=True):
            if p.is_file() and p.relative_to(dst) not in wanted:
                p.unlink()
                changed.append(p)
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    return changed


def generate_release(course: Path, names: list[str], dest: Path) -> dict[str, list[Path]]:
    """Generate the student release of ``names`` from ``course``'s source directory into
    ``dest/<assignment>/`` (normally ``<course>/notebooks``, a tmp folder in tests).

    Returns ``{assignment: [paths written or removed]}`` (empty lists when up to date).
    Raises ValueError for an unknown assignment and :class:`ReleaseError` when nbgrader fails.
    """
    course = Path(course).resolve()
    source, release = course_dirs(course)
    known = assignments(course)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown assignment(s) {', '.join(unknown)}: "
                         f"{course / source} holds {', '.join(known) or 'none'}")
    changed: dict[str, list[Path]] = {}
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        root = Path(tmp)
        for name in names:
            copy_tree(course / source / name, root / source / name)
        for name in names:
            result = run_nbgrader("generate_assignment", root, course, name)
            if not result.ok:
                raise ReleaseError(f"nbgrader generate_assignment {name} failed: "
                                   f"{result.last_error()}\n{result.log}\n{result.error}")
            out = root / release / name
            for path in sorted(out.glob("*.ipynb")):
                nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
                path.unlink()
                write_notebook(normalize(nb), path)
            changed[name] = _mirror(out, Path(dest) / name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.release",
        description="Regenerate the student release (notebooks/) from solutions/ with nbgrader.")
    parser.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                        help="assignments to release (default: all in solutions/)")
    parser.add_argument("--course", type=Path, default=REPO_ROOT,
                        help="course root holding nbgrader_config.py (default: this repository)")
    args = parser.parse_args(argv)

    course = args.course.resolve()
    names = args.assignments or assignments(course)
    if not names:
        print(f"no assignments in {course / course_dirs(course)[0]}: nothing to release")
        return 0
    _, release = course_dirs(course)
    try:
        changed = generate_release(course, names, course / release)
    except (ValueError, ReleaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if course == REPO_ROOT.resolve() and write_exercise_table(course, names):
        print(f"updated {EXERCISES.relative_to(course)}")
    for name in names:
        files = changed[name]
        state = "up to date" if not files else "updated " + ", ".join(
            str(p.relative_to(course)) for p in files)
        print(f"{name}: {state}")
    stale = sorted(p.name for p in (course / release).glob("*")
                   if p.is_dir() and p.name not in assignments(course))
    if stale and not args.assignments:
        print(f"warning: {release}/ holds folders with no source in solutions/: "
              f"{', '.join(stale)} (remove them by hand if they are retired)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
