"""Taking in one student's submission: is it there, is it a notebook, and a copy fit to grade.

:func:`inspect_submission` says what a student's folder holds for an assignment (a status and,
for a problem, a detail in words a student understands).  :func:`normalize` turns a submitted
notebook into the copy that nbgrader grades, repairing what a learner can do to a notebook by
accident or on purpose, each repair written down as a note for the report and feedback:

* a graded cell (answer or test) pasted twice: the copy that sits where the release has it
  (between the graded cells around it; else the one with the release's cell id; else the
  first) keeps the nbgrader metadata; the others run as ordinary cells.  (nbgrader itself aborts on such a notebook, and its message blames
  an old metadata format.)
* nbgrader metadata naming a cell the assignment does not have: removed (the cell runs as an
  ordinary cell and earns nothing);
* a graded cell whose nbgrader metadata or type was changed (points, ``grade`` flag, code to
  markdown ...): the release's metadata and type are put back;
* a graded cell deleted: the release's cell is put back where it was (after the nearest cell
  before it that is still there).  A test cell is then restored in full, hidden tests
  included, by nbgrader's ``OverwriteCells`` from the gradebook, as is every edited test cell;
  an answer cell comes back as the blank stub and scores nothing;
* stored outputs and execution counts: dropped (nothing a notebook claims to have printed is
  believed; nbgrader's ``ClearOutput`` does the same);
* duplicate cell ids (a pasted cell): made unique.

:func:`answers_changed` compares the answer cells of a normalized notebook with the release's
(whitespace at the ends ignored), which the grade command uses to flag a *blank* submission.

Nothing is read from or written to the submitted file itself: this works on a copy in memory.
"""
from __future__ import annotations

import copy
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .preprocessors import role
from .protocol import Status

USABLE, MISSING, MISNAMED = Status.GRADED, Status.MISSING, Status.MISNAMED
INVALID_JSON, INVALID_NOTEBOOK = Status.INVALID_JSON, Status.INVALID_NOTEBOOK

MAX_NOTEBOOK_BYTES = 50 * 2**20
"""A submitted notebook larger than this is refused (an honest one is well under 1 MiB
without outputs; this keeps a 5 GB file from being read into memory)."""
MAX_EXTRA_BYTES = 50 * 2**20
"""Other files of a submission (data a learner saved) are copied up to this total."""


@dataclass
class Intake:
    """One student's one assignment, as found: ``status`` (:data:`USABLE` or a problem),
    ``detail`` (what is wrong, for a problem), ``notebooks`` (``{name: notebook}`` for the
    notebooks that can be graded), ``notes`` (repairs made), ``changed`` (grade_ids of the
    answer cells whose source differs from the release's, see :func:`answers_changed`; each
    prefixed ``notebook/`` when the assignment has several notebooks) and ``added`` (how many
    code cells of the notebooks are not in the release, see :func:`added_cells`)."""
    status: str
    detail: str = ""
    notebooks: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    added: int = 0


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _gid(cell) -> str | None:
    meta = _meta(cell)
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    return gid if isinstance(gid, str) and gid else None


def _text(cell) -> str:
    """A cell's source as one string (a notebook file may store it as a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def inspect_submission(student_dir: Path, assignment: str,
                       releases: dict[str, nbformat.NotebookNode],
                       uploaded: dict[str, str] | None = None) -> Intake:
    """What ``student_dir`` holds for ``assignment`` (``releases``: ``{notebook name: the
    student release of it}``), with each present notebook normalized (see :func:`normalize`).
    ``uploaded``: ``{path in the assignment folder: the name the student's file had}`` for
    files the LMS intake renamed (:meth:`course_tools.lms.Staged.uploaded`); a problem with
    such a file names it as uploaded.

    A one-notebook assignment whose folder holds exactly one notebook under another name (a
    browser's ``lesson1 (1).ipynb``, ``Copy of lesson1.ipynb``, Jupyter's
    ``lesson1-Copy1.ipynb``, any name) is graded, with a note naming the file; two or more
    notebooks, none of them with the expected name, are :data:`MISNAMED` (listing them)."""
    folder = student_dir / assignment
    expected = [f"{nb}.ipynb" for nb in releases]
    if not folder.is_dir():
        elsewhere = sorted(str(p.relative_to(student_dir)) for name in expected
                           for p in [*student_dir.glob(name), *student_dir.glob(f"*/{name}")])
        near = sorted(p.name for p in student_dir.iterdir()
                      if p.is_dir() and p.name.lower().replace(" ", "").replace("_", "")
                      == assignment.lower().replace("_", ""))
        if elsewhere or near:
            found = ", ".join(elsewhere or [n + "/" for n in near])
            return Intake(MISNAMED, f"found {found}; expected {assignment}/{expected[0]}")
        loose = sorted(p.name for p in student_dir.glob("*.ipynb"))
        if loose:
            return Intake(MISNAMED, f"found {', '.join(loose[:5])}; expected "
                                    f"{assignment}/{expected[0]}")
        return Intake(MISSING, f"no folder {assignment}/ in the submission")
    present = [n for n in expected if (folder / n).is_file()]
    paths = {n: folder / n for n in present}
    renamed = ""
    if not present:
        others = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.ipynb")
                        if ".ipynb_checkpoints" not in p.parts)
        if len(others) == 1 and len(expected) == 1:
            # the only notebook, under another name (`lesson1 (1).ipynb`, `Copy of ...`)
            present, paths = expected, {expected[0]: folder / others[0]}
            renamed = (f"graded {others[0]}, the only notebook in {assignment}/ "
                       f"(expected the name {expected[0]})")
        elif others:
            return Intake(MISNAMED, (f"found {len(others)} notebooks in {assignment}/ "
                                     f"({', '.join(others[:5])}) and none named "
                                     f"{', '.join(expected)}: which one to grade?"))
        else:
            return Intake(MISSING, f"no notebook {expected[0]} in {assignment}/")
    intake = Intake(USABLE, notes=[renamed] if renamed else [])
    for name in present:
        path = paths[name]
        sent = (uploaded or {}).get(path.relative_to(folder).as_posix(), path.name)
        if path.is_symlink():
            return Intake(INVALID_NOTEBOOK, f"{sent} is a symbolic link, not a file: "
                                            "submit the notebook itself")
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            return Intake(INVALID_NOTEBOOK, f"{sent} is {size / 2**20:.0f} MiB (more than "
                                            f"{MAX_NOTEBOOK_BYTES // 2**20} MiB): clear its "
                                            "outputs and submit it again")
        raw = path.read_bytes()
        try:
            json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return Intake(INVALID_JSON, f"{sent} is not valid JSON ({exc}); the file may be "
                                        "damaged or cut short")
        stem = name[:-len(".ipynb")]
        try:
            # parse and convert without nbformat's repairs (it would give a pasted cell a
            # random id); normalize() repairs deterministically, then the result must validate
            nb = nbformat.convert(nbformat.reader.reads(raw.decode("utf-8")), 4)
            if not isinstance(nb.get("cells"), list):
                raise ValueError("it has no list of cells")
            for cell in nb.cells:
                if not isinstance(cell, dict) or cell.get("cell_type") not in (
                        "code", "markdown", "raw"):
                    raise ValueError("a cell of unknown type")
                if not isinstance(cell.get("metadata", {}), dict):
                    raise ValueError("a cell's metadata is not a dict")
                cell.setdefault("metadata", nbformat.NotebookNode())
            theirs, ours = {_gid(c) for c in nb.cells} - {None}, {_gid(c) for c in releases[stem].cells} - {None}
            if len(theirs) >= 3 and not theirs & ours:  # another assignment's notebook, in this one's place
                title = next((ln.lstrip("#").strip() for c in nb.cells if c.get("cell_type") == "markdown"
                              for ln in _text(c).splitlines() if ln.startswith("#")), "")
                return Intake(MISNAMED, f"{sent} is another assignment's notebook" + (f" ({title!r})" if title
                              else "") + f": none of its {len(theirs)} graded cells is {assignment}'s; "
                              f"submit {assignment}/{name}")
            notes = normalize(nb, releases[stem])
            nbformat.validate(nb)
        except Exception as exc:  # nbformat raises several kinds
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return Intake(INVALID_NOTEBOOK, f"{sent} is JSON but not a notebook ({first[:200]})")
        intake.notebooks[stem] = nb
        intake.notes += [f"{stem}: {n}" if len(expected) > 1 else n for n in notes]
        intake.changed += [f"{stem}/{g}" if len(expected) > 1 else g
                           for g in answers_changed(nb, releases[stem])]
        intake.added += added_cells(nb, releases[stem])
    missing = sorted(set(expected) - set(present))
    if missing:
        intake.notes.append(f"missing {', '.join(missing)} (scored 0)")
    return intake


def answers_changed(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """``grade_id`` of each answer cell (nbgrader ``solution: true``) of ``nb`` whose source
    differs from the same cell of ``release``, whitespace at either end ignored; in the order
    of ``nb``.

    ``nb`` should be normalized first (:func:`normalize`): then every answer cell of the
    release is in it exactly once, a deleted one put back as the release's stub (so
    unchanged).  An answer cell of ``nb`` that the release does not have counts as changed.
    """
    released = {_gid(c): c.source.strip() for c in release.cells
                if _gid(c) and role(c) == "answer"}
    return [_gid(c) for c in nb.cells if _gid(c) and role(c) == "answer"
            and c.source.strip() != released.get(_gid(c))]


def added_cells(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> int:
    """How many code cells of ``nb`` without nbgrader metadata hold code (not blank) that no
    cell of ``release`` holds, whitespace at either end ignored: cells a learner added or
    rewrote.  Cells with a ``grade_id`` are not counted (answer cells: see
    :func:`answers_changed`; test and read-only cells are restored from the gradebook)."""
    released = {c.source.strip() for c in release.cells}
    return sum(1 for c in nb.cells if c.cell_type == "code" and not _gid(c)
               and c.source.strip() and c.source.strip() not in released)


def extra_files(src: Path, limit: int = MAX_EXTRA_BYTES) -> tuple[dict[str, bytes], list[str]]:
    """The regular files under ``src`` except notebooks, ``{relative path: bytes}`` (symbolic
    links, devices and pipes are skipped, and files past ``limit`` bytes in all), and what
    was left out."""
    files, left, total = {}, [], 0
    for root, dirs, names in os.walk(src, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for f in sorted(names):
            p = Path(root) / f
            rel = p.relative_to(src)
            if f.endswith(".ipynb") or f.startswith(".") or f.endswith(".pyc"):
                continue
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                left.append(f"{rel} (not a regular file)")
                continue
            if total + st.st_size > limit:
                left.append(f"{rel} (too large)")
                continue
            total += st.st_size
            files[rel.as_posix()] = p.read_bytes()
    return files, left


def copy_extra_files(src: Path, dst: Path, limit: int = MAX_EXTRA_BYTES) -> list[str]:
    """Copy :func:`extra_files` of ``src`` into ``dst``; returns what was left out."""
    files, left = extra_files(src, limit)
    for rel, data in files.items():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(data)
    return left


def _restore_metadata(cell, release_cell) -> nbformat.NotebookNode:
    """``cell`` with the release cell's type and nbgrader metadata (source kept)."""
    if cell.cell_type != release_cell.cell_type:
        new = (nbformat.v4.new_code_cell if release_cell.cell_type == "code"
               else nbformat.v4.new_markdown_cell)(cell.source)
        new.metadata = copy.deepcopy(cell.metadata)
        if "id" in cell:
            new.id = cell.id
        cell = new
    cell.metadata["nbgrader"] = copy.deepcopy(release_cell.metadata["nbgrader"])
    return cell


_MEANINGLESS = ("checksum", "cell_type", "schema_version")
"""nbgrader settings that say nothing a grade depends on: nbgrader's own copy of the cell's
type (JupyterLab's Create Assignment panel drops it on every graded cell it shows), the
checksum and the schema version.  A submission that changed only these is repaired without a
note."""


def _meaning(meta: dict) -> dict:
    """The nbgrader settings a grade depends on, with nbgrader's defaults filled in (an absent
    ``locked`` is ``False``) and points as a number (``3`` and ``3.0`` are the same)."""
    out = {k: bool(meta.get(k, False)) for k in ("grade", "solution", "task", "locked")}
    out["grade_id"] = meta.get("grade_id")
    if out["grade"] or out["task"]:
        try:
            out["points"] = float(meta.get("points", 0))
        except (TypeError, ValueError):
            out["points"] = meta.get("points")
    extra = {k: v for k, v in meta.items() if k not in out and k not in _MEANINGLESS
             and k != "points"}
    return {**out, **extra}


def normalize(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """Repair ``nb`` in place against its ``release`` (see the module docstring); returns the
    notes, in words a student understands, in a fixed order (so a rerun says the same)."""
    notes: list[str] = []
    released = {_gid(c): c for c in release.cells if _gid(c)}
    release_ids = {_gid(c): c.get("id") for c in release.cells if _gid(c)}

    # nbgrader metadata the assignment does not know, or that is not even a dict
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", None)
        if meta is None:
            continue
        gid = _gid(cell)
        if not isinstance(meta, dict) or gid not in released:
            del cell.metadata["nbgrader"]
            if gid:
                notes.append(f"cell {i + 1} claimed to be graded cell {gid!r}, which this "
                             "assignment does not have: it ran as an ordinary cell")

    # graded cells present more than once: one keeps the metadata
    where: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        if _gid(cell):
            where.setdefault(_gid(cell), []).append(i)
    order = [_gid(c) for c in release.cells if _gid(c)]
    for gid, idxs in where.items():
        if len(idxs) < 2:
            continue
        keep = min(idxs, key=lambda i: (not _in_place(nb, i, gid, order, where),
                                        nb.cells[i].get("id") != release_ids[gid], i))
        for i in idxs:
            if i != keep:
                del nb.cells[i].metadata["nbgrader"]
        kind = "test cell" if role(released[gid]) == "test" else "cell"
        notes.append(f"{kind} {gid} appeared {len(idxs)} times: the copy at position "
                     f"{keep + 1} was graded, the others ran as ordinary cells")

    # metadata and type of each graded cell as released; edited test cells
    edited = []
    for i, cell in enumerate(nb.cells):
        gid = _gid(cell)
        if not gid:
            continue
        rel = released[gid]
        mine = {k: v for k, v in _meta(cell).items() if k != "checksum"}
        theirs = {k: v for k, v in rel.metadata["nbgrader"].items() if k != "checksum"}
        if cell.cell_type != rel.cell_type or mine != theirs:
            if cell.cell_type != rel.cell_type or _meaning(mine) != _meaning(theirs):
                notes.append(f"the nbgrader settings of cell {gid} were changed: restored")
            nb.cells[i] = cell = _restore_metadata(cell, rel)
        if role(rel) == "test" and cell.source.strip() != rel.source.strip():
            edited.append(gid)
    if edited:
        notes.append(f"test cell{'s' if len(edited) > 1 else ''} {', '.join(edited)} "
                     f"{'were' if len(edited) > 1 else 'was'} edited: restored from the "
                     "gradebook before grading")

    # graded cells that are gone: put the release's back after their predecessor
    present = {_gid(c) for c in nb.cells if _gid(c)}
    for j, rel in enumerate(release.cells):
        gid = _gid(rel)
        if not gid or gid in present:
            continue
        at = 0
        for prev in reversed(release.cells[:j]):
            pos = _find(nb, prev)
            if pos is not None:
                at = pos + 1
                break
        cell = copy.deepcopy(rel)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nb.cells.insert(at, cell)
        present.add(gid)
        if role(rel) == "test":
            notes.append(f"test cell {gid} was missing: it was put back and run")
        elif role(rel) == "answer":
            notes.append(f"answer cell {gid} was missing: it was put back blank")
        else:
            notes.append(f"cell {gid} was missing: it was put back")

    # no stored outputs; every cell has an id (nbformat 4.5), unique
    nb.nbformat, nb.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5) or 5))
    seen_ids: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cid = cell.get("id")
        if not isinstance(cid, str) or not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", cid):
            cid = cell["id"] = f"cell-{i + 1}"
        if cid in seen_ids:
            n = 2
            while f"{cid}-{n}" in seen_ids:
                n += 1
            cell["id"] = cid = f"{cid}-{n}"[-64:]
        seen_ids.add(cid)
    return notes


def _in_place(nb, i: int, gid: str, order: list[str], where: dict[str, list[int]]) -> bool:
    """Is position ``i`` between the graded cells that come before and after ``gid`` in the
    release (those present once)?"""
    k = order.index(gid)
    before = [where[g][0] for g in order[:k] if len(where.get(g, [])) == 1]
    after = [where[g][0] for g in order[k + 1:] if len(where.get(g, [])) == 1]
    return (not before or max(before) < i) and (not after or i < min(after))


def _find(nb, release_cell) -> int | None:
    """Index in ``nb`` of a release cell: by grade_id, else by cell id."""
    gid, cid = _gid(release_cell), release_cell.get("id")
    for i, cell in enumerate(nb.cells):
        if (gid and _gid(cell) == gid) or (not gid and cid and cell.get("id") == cid):
            return i
    return None
