"""What students need, in a folder of its own: ``python -m course_tools.handout OUT``.

The repository holds the model answers and the hidden tests (``solutions/``), the wrong-answer
registries and the hidden capstone cards (``tests/``) and the grader: a class must not get it.
The handout holds only

* ``notebooks/`` (the student release, as ``make release`` generates it),
* ``course_lib/`` (counters, toy models, shipped weights and cards, the checks with sealed
  answers),
* ``requirements.txt``, ``environment.yml``, ``pyproject.toml`` (the same pinned set-up),
* ``lab.mk`` and a ``Makefile`` that includes it, so ``make lab`` works as in the repository,
  and ``lab-settings/`` (the lab without nbgrader's instructor tools, no news pop-up),
* a ``README.md`` for students (``course_tools/handout_readme.md``) and a ``.gitignore``.

It refuses a release that is out of date with ``solutions/`` (run ``make release``) and an
``OUT`` that exists and is not empty, and it checks what it wrote: no file holds an nbgrader
solution or hidden-test marker.  Exit status 2 with a one-line message on any problem.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from . import REPO_ROOT, assignments

FILES = ("requirements.txt", "environment.yml", "pyproject.toml", "lab.mk")
FOLDERS = ("notebooks", "course_lib", "lab-settings")
MAKEFILE = ("# Transformers by counting (student copy): `make lab` sets up and opens the course.\n"
            "include lab.mk\n")
GITIGNORE = ".venv/\n__pycache__/\n*.egg-info/\n.ipynb_checkpoints/\n/my-work/\n"
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


class HandoutError(RuntimeError):
    """The handout cannot be written (the message says why)."""


def stale_notebooks(course: Path) -> list[str]:
    """Assignments whose ``notebooks/`` copy differs from a release generated now from
    ``solutions/`` (empty when the release is up to date)."""
    from .release import generate_release

    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "notebooks"
        generate_release(course, assignments(course), fresh)
        return [a for a in assignments(course)
                if not (course / "notebooks" / a).is_dir()
                or sorted(p.read_bytes() for p in (course / "notebooks" / a).glob("*.ipynb"))
                != sorted(p.read_bytes() for p in (fresh / a).glob("*.ipynb"))]


def marked_files(root: Path) -> list[str]:
    """Files under ``root`` that hold an nbgrader solution or hidden-test marker."""
    found = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".ipynb", ".py", ".md", ".txt", ".json", ".toml", ".yml"):
            text = p.read_text(encoding="utf-8", errors="replace")
            if any(m in text for m in MARKERS):
                found.append(str(p.relative_to(root)))
    return found


def write_handout(out: Path, course: Path = REPO_ROOT) -> list[str]:
    """Write the handout to ``out`` (which must not exist or be empty); return the top-level
    entries written.  Raises :class:`HandoutError`."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HandoutError(f"{out} exists and is not an empty folder: choose a new one")
    stale = stale_notebooks(course)
    if stale:
        raise HandoutError(f"notebooks/ is out of date with solutions/ for {', '.join(stale)}: "
                           "run `make release` first")
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(course / name, out / name)
    for name in FOLDERS:
        shutil.copytree(course / name, out / name, ignore=_SKIP)
    (out / "Makefile").write_text(MAKEFILE)
    (out / ".gitignore").write_text(GITIGNORE)
    shutil.copyfile(Path(__file__).with_name("handout_readme.md"), out / "README.md")
    leaked = marked_files(out)
    if leaked:
        raise HandoutError(f"the handout would hold solution or hidden-test code in "
                           f"{', '.join(leaked[:5])}")
    return sorted(p.name for p in out.iterdir())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.handout",
        description="Write what students need (notebooks/, course_lib/, the set-up files) to "
                    "OUT: no solutions, hidden tests, tests or grading tools.")
    parser.add_argument("out", type=Path, metavar="OUT", help="a new or empty folder")
    parser.add_argument("--course", type=Path, default=REPO_ROOT,
                        help="course root (default: this repository)")
    args = parser.parse_args(argv)
    try:
        names = write_handout(args.out, args.course)
    except HandoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"handout written to {args.out}: {', '.join(names)}")
    print("students run `make lab` in it; they hand in my-work/<lesson>/<lesson>.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main())
