"""Lines of Python in course_lib/checks/ per graded cell of the course (issue: checks as data).

Method: every ``*.py`` file under ``course_lib/checks/`` is read; ``lines`` is its line count
(what ``wc -l`` prints), ``code`` leaves out blank lines and lines holding only a comment, ``docs``
counts the lines of its docstrings (string statements, found with ``ast``; part of ``code``).
Graded cells are the cells of ``solutions/*/*.ipynb`` whose nbgrader metadata has
``grade: true``.  Data files (``sealed_answers/*.json``, ``hints/*.toml``, ``exercises.json``)
are not Python and are listed apart.  The bar is the ``lines`` column's total per graded cell.
The notebook's tutor (``course_lib/tutor.py``: how a failure looks in IPython) is not a check and
lives outside ``checks/``; it is listed apart too, with the figure it would give counted in.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "course_lib" / "checks"


def graded_cells() -> dict[str, int]:
    out = {}
    for nb in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        out[nb.stem] = sum(1 for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    return out


def counts(path: Path) -> tuple[int, int, int]:
    text = path.read_text()
    lines = text.splitlines()
    docs = sum(node.end_lineno - node.lineno + 1 for node in ast.walk(ast.parse(text))
               if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
               and isinstance(node.value.value, str))
    return len(lines), sum(1 for ln in lines if ln.strip() and not ln.strip().startswith("#")), docs


def main() -> None:
    cells = graded_cells()
    rows, total, code, docs = [], 0, 0, 0
    for path in sorted(CHECKS.rglob("*.py")):
        n, c, d = counts(path)
        total, code, docs = total + n, code + c, docs + d
        rows.append((str(path.relative_to(CHECKS)), n, c, d, cells.get(path.stem, "")))
    print(__doc__.split("\n\n")[1].replace("\n", " "), "\n")
    print("| file | lines | code | docs | graded cells |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:,} | {r[4]} |")
    n_cells = sum(cells.values())
    print(f"| **all** | **{total:,}** | **{code:,}** | **{docs:,}** | **{n_cells}** |\n")
    print(f"lines per graded cell: {total / n_cells:.1f} (code only: {code / n_cells:.1f}; code without docstrings: "
          f"{(code - docs) / n_cells:.1f}); bar: 45")
    tutor = counts(ROOT / "course_lib" / "tutor.py")[0]
    print(f"course_lib/tutor.py, not a check: {tutor:,} lines (counted in: {(total + tutor) / n_cells:.1f} "
          "per graded cell)")
    data = [p for p in CHECKS.rglob("*") if p.suffix in (".json", ".toml")]
    print(f"data files beside them: {len(data)} files, "
          f"{sum(len(p.read_text().splitlines()) for p in data):,} lines")


if __name__ == "__main__":
    main()
