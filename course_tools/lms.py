"""Submissions in, whatever the learning management system (LMS) gave: a folder or a ``.zip``
in one of four layouts, turned into the ``<student>/<assignment>/`` folders that
course_tools.grade takes, with each student's LMS id, name, late flag and notes.

Layouts (:data:`LAYOUTS`), detected in this order unless ``layout=`` forces one:

``nbgrader``
    ``<student>/<assignment>/<notebook>.ipynb`` (nbgrader's own layout; also a course's or an
    exchange's ``submitted/`` folder holding it).  The student id is the folder name.
``moodle``
    Moodle's "Download all submissions": one folder per student and submission plugin,
    ``<Full Name>_<id>_assignsubmission_file_/<file>`` (or, without "download submissions in
    folders", flat files ``<Full Name>_<id>_assignsubmission_file_<file>``).  ``<id>`` is the
    assignment's participant id (the worksheet's ``Participant <id>``); blind marking writes
    ``Participant_<id>`` as the name.  Source: Moodle ``mod/assign/locallib.php``
    ``download_submissions`` (prefix ``fullname_uniqueid``, then ``_assignsubmission_<plugin>_``).
``canvas``
    Canvas's "Download Submissions": flat files
    ``<login>[_late]_<user id>_<submission id>_<file name>``, where ``<login>`` is the
    student's sortable name lower-cased without punctuation (``anon`` when anonymous) and
    ``_late`` marks a late submission; a file uploaded again under the same name gets
    ``-1``, ``-2``, ... before its extension (``lesson1-1.ipynb``).  The student id is the
    Canvas user id (the gradebook export's ``ID`` column).
``plain``
    One notebook per student: ``<student>.ipynb`` files, or ``<student>/<any name>.ipynb``
    folders.

A flat download (Canvas, Moodle, plain) holds one assignment: which one is told by
``assignment=`` (``--assignment``), else by the notebooks' names (``lesson1.ipynb``), else by
the course having only one; otherwise :class:`LMSError` says to pass ``--assignment``.

:func:`safe_extract` unpacks a ``.zip`` refusing absolute paths, ``..``, symbolic links,
encrypted entries and decompression bombs (:data:`MAX_ENTRIES`, :data:`MAX_TOTAL_BYTES`,
:data:`MAX_ENTRY_BYTES`, counted on the bytes actually inflated, not the sizes the archive
claims), and writes nothing outside its destination.  :func:`read_roster` reads an LMS roster
(a Canvas gradebook export, a Moodle grading worksheet or a plain ``id,name`` CSV) so that every
enrolled student gets a row (``missing`` when they submitted nothing).
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

LAYOUTS = ("nbgrader", "moodle", "canvas", "plain")

MAX_ENTRIES = 20_000
"""Most entries a submissions zip may hold (a class of 1000 with 20 files each)."""
MAX_TOTAL_BYTES = 4 * 2**30
"""Most bytes a submissions zip may inflate to, all entries together."""
MAX_ENTRY_BYTES = 512 * 2**20
"""Most bytes one entry may inflate to (course_tools.intake refuses a notebook past 50 MiB)."""

CANVAS_FILE = re.compile(
    r"^(?P<login>[^_/]+?)(?P<late>_late)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>[^/]+)$",
    re.IGNORECASE)
"""A Canvas bulk-download file name (see the module docstring)."""
MOODLE_ENTRY = re.compile(
    r"^(?P<name>.+)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.*)$")
"""A Moodle download's folder (``file`` empty) or flat file name."""
RESUBMITTED = re.compile(r"^(?P<stem>.+)-(?P<n>\d+)(?P<ext>\.[^.]+)$")
"""Canvas's name for a file uploaded again: ``lesson1-2.ipynb``."""
IGNORED_NAMES = (".DS_Store", "__MACOSX", ".ipynb_checkpoints", "__pycache__", "Thumbs.db")


class LMSError(ValueError):
    """Submissions that cannot be taken in (unknown layout, unsafe zip, no assignment)."""


@dataclass
class Submission:
    """One student's submission of one assignment as the LMS delivered it.

    ``student``: the id grading uses (the LMS id: Canvas user id, Moodle participant id, the
    nbgrader folder name, the plain file's stem); ``name``: the student's name when the LMS
    gives one; ``late``: ``True``/``False`` when the LMS says, ``None`` when it does not;
    ``files``: the notebooks found (paths in the unpacked download); ``notes``: what was done
    on the way in (resubmissions kept and dropped, files renamed, roster rows without a
    submission), for the report and the CSV."""
    student: str
    assignment: str
    name: str = ""
    late: bool | None = None
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lms_id: str = ""
    staged_names: dict[str, str] = field(default_factory=dict, repr=False)
    """``{path in the download: name under <student>/<assignment>/}`` (default: its name)."""
    roster_only: bool = False
    """On the roster, with nothing in the download."""

    def uploaded(self) -> dict[str, str]:
        """``{path under <student>/<assignment>/: the file's name in the download}`` for the
        files staged under another name (``lesson1.ipynb`` from Canvas's
        ``smithjo_12345_67890_lesson1-1.ipynb``), so that a problem names the file sent."""
        return {rel: Path(p).name for p, rel in self.staged_names.items() if rel != Path(p).name}


@dataclass
class Staged:
    """The submissions taken in: ``root`` holds ``<student>/<assignment>/`` folders for the
    grade command; ``layout`` is what was detected (or forced); ``assignments`` the
    assignments they are for; ``submissions`` one :class:`Submission` per student and
    assignment; ``notes`` remarks on the whole download (files left out)."""
    root: Path
    layout: str
    assignments: list[str]
    submissions: list[Submission]
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the report: the layout, how many students, which assignments."""
        late = sum(1 for s in self.submissions if s.late)
        students = {s.student for s in self.submissions}
        sent = {s.student for s in self.submissions if s.files}
        return (f"submissions: {self.layout} layout, {len(students)} student(s)"
                + (f" ({len(sent)} submitted, {len(students - sent)} on the roster only)"
                   if sent != students else "")
                + f", {', '.join(self.assignments)}" + (f", {late} late" if late else ""))

    def by_student(self) -> dict[tuple[str, str], Submission]:
        return {(s.student, s.assignment): s for s in self.submissions}


# --------------------------------------------------------------------------------------
# Safe unzip

def _member_path(name: str) -> PurePosixPath:
    """The relative path of a zip entry, or :class:`LMSError` if it points outside."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        raise LMSError(f"unsafe zip: entry {name!r} has an absolute path; nothing extracted")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LMSError(f"unsafe zip: entry {name!r} climbs out of the folder with '..'; "
                       "nothing extracted")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def safe_extract(archive: Path, dest: Path, *, max_entries: int = MAX_ENTRIES,
                 max_total: int = MAX_TOTAL_BYTES, max_entry: int = MAX_ENTRY_BYTES) -> Path:
    """Unpack ``archive`` (a zip) into ``dest`` (created; must be empty or new) and return it.

    Raises :class:`LMSError` (one line, naming the entry) for a file that is not a zip, an
    absolute path, ``..``, a symbolic link or other special file, an encrypted entry, more
    than ``max_entries`` entries, an entry inflating past ``max_entry`` bytes or all of them
    past ``max_total`` bytes (bytes counted as they are inflated).  On error ``dest`` is
    removed again; nothing is ever written outside it."""
    archive, dest = Path(archive), Path(dest)
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise LMSError(f"{archive.name} is not a readable zip file ({exc})") from None
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise LMSError(f"cannot unpack {archive.name} into {dest}: the folder is not empty")
    root = dest.resolve()
    try:
        with zf:
            infos = zf.infolist()
            if len(infos) > max_entries:
                raise LMSError(f"unsafe zip: {archive.name} has {len(infos)} entries (more "
                               f"than {max_entries}); nothing extracted")
            plan = []
            for info in infos:
                rel = _member_path(info.filename)
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode) or (mode and stat.S_IFMT(mode) not in
                                          (0, stat.S_IFREG, stat.S_IFDIR)):
                    raise LMSError(f"unsafe zip: entry {info.filename!r} is a symbolic link "
                                   "or special file; nothing extracted")
                if info.flag_bits & 0x1:
                    raise LMSError(f"zip entry {info.filename!r} is encrypted; nothing "
                                   "extracted")
                plan.append((info, rel))
            total = 0
            for info, rel in plan:
                target = root.joinpath(*rel.parts)
                if target != root and root not in target.parents:  # belt and braces
                    raise LMSError(f"unsafe zip: entry {info.filename!r} leaves the folder")
                if info.is_dir() or str(rel) == ".":
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                written = 0
                with zf.open(info) as src, open(target, "xb") as out:
                    while True:
                        chunk = src.read(1 << 20)
                        if not chunk:
                            break
                        written += len(chunk)
                        total += len(chunk)
                        if written > max_entry:
                            raise LMSError(f"unsafe zip: entry {info.filename!r} inflates "
                                           f"past {max_entry // 2**20} MiB (a decompression "
                                           "bomb?); nothing extracted")
                        if total > max_total:
                            raise LMSError(f"unsafe zip: {archive.name} inflates past "
                                           f"{max_total // 2**20} MiB in all (a decompression "
                                           "bomb?); nothing extracted")
                        out.write(chunk)
    except LMSError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError) as exc:  # a damaged archive
        shutil.rmtree(dest, ignore_errors=True)
        raise LMSError(f"{archive.name} could not be unpacked ({exc})") from None
    return dest


# --------------------------------------------------------------------------------------
# Layouts

def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.name not in IGNORED_NAMES and not p.name.startswith("."))


def _notebooks(folder: Path) -> list[Path]:
    """Notebooks under ``folder`` (any depth), checkpoints and hidden folders left out."""
    return sorted(p for p in folder.rglob("*.ipynb")
                  if not any(part in IGNORED_NAMES or part.startswith(".")
                             for part in p.relative_to(folder).parts) and p.is_file()
                  and not p.is_symlink())


def _unwrap(root: Path, known: list[str]) -> Path:
    """Descend into ``submitted/`` and into a lone folder wrapping a download (a zip of a
    folder): one whose entries are named as Canvas or Moodle name them, that holds the
    nbgrader layout, or that holds several student folders or notebooks.  A lone student
    folder (nbgrader's ``<student>/<assignment>/``) is not descended into."""
    for _ in range(3):
        entries = _entries(root)
        if len(entries) != 1 or not entries[0].is_dir() or _looks_nbgrader(root, known) \
                or MOODLE_ENTRY.match(entries[0].name):
            break
        inner = entries[0]
        inside = _entries(inner)
        if inner.name == "submitted" or _looks_nbgrader(inner, known) or any(
                MOODLE_ENTRY.match(p.name) or CANVAS_FILE.match(p.name) for p in inside) or (
                len(inside) > 1 and all(p.is_dir() or p.suffix == ".ipynb" for p in inside)):
            root = inner
        else:
            break
    return root


def _looks_nbgrader(root: Path, known: list[str]) -> bool:
    return any(d.is_dir() and (d / a).is_dir() for d in _entries(root) for a in known)


def detect_layout(root: Path, known: list[str]) -> str:
    """The layout of an unpacked download (see :data:`LAYOUTS`), or :class:`LMSError`."""
    entries = _entries(root)
    if _looks_nbgrader(root, known):
        return "nbgrader"
    if any(MOODLE_ENTRY.match(p.name) for p in entries):
        return "moodle"
    files = [p for p in entries if p.is_file()]
    if files and any(CANVAS_FILE.match(p.name) for p in files if p.suffix == ".ipynb"):
        return "canvas"
    if any(p.suffix == ".ipynb" for p in files) or any(
            p.is_dir() and any(p.glob("*.ipynb")) for p in entries):
        return "plain"
    raise LMSError(f"cannot tell the layout of {root}: no student folder holds an assignment "
                   f"folder ({', '.join(known) or 'none in the course'}), and no file is named "
                   "as Canvas or Moodle name downloads; pass --layout")


def _assignment(asked: list[str] | None, names: list[str], known: list[str],
                where: str) -> str:
    """The one assignment of a flat download (see the module docstring)."""
    if asked:
        if len(asked) > 1:
            raise LMSError(f"a {where} download holds one assignment; got --assignment "
                           f"{' '.join(asked)}")
        return asked[0]
    stems = {_base_stem(n) for n in names}
    hits = sorted(stems & set(known))
    if len(hits) == 1:
        return hits[0]
    if len(known) == 1:
        return known[0]
    found = (f"its notebooks are named {', '.join(sorted(stems)[:5])}" + (
        f" and {len(stems) - 5} more" if len(stems) > 5 else "") if stems else "it holds no notebook")
    raise LMSError(f"cannot tell which assignment this {where} download is for ({found}; "
                   f"the course has {', '.join(known)}): pass --assignment")


def _plain_id(stem: str) -> str:
    """A student id from a plain folder's file or folder name (``Bob Smith`` -> ``Bob_Smith``:
    ids keep letters, digits and ``_ . @ + -``; the name itself is kept as the student's)."""
    sid = re.sub(r"[^A-Za-z0-9_.@+-]+", "_", stem).strip("_.")
    return sid or "student"


_COPY_NAMES = re.compile(r"^copy of\s+|\s*\(\d+\)$|-copy\d*$", re.IGNORECASE)
"""What browsers and Jupyter add to a copied notebook's name: ``Copy of ...``, `` (1)``,
``-Copy1``."""


def _base_stem(name: str) -> str:
    """The notebook name a download's file stands for: ``lesson1-2.ipynb`` (a Canvas
    resubmission), ``lesson1 (1).ipynb``, ``Copy of lesson1.ipynb`` are ``lesson1``."""
    stem = name[:-len(".ipynb")] if name.endswith(".ipynb") else name
    m = RESUBMITTED.match(stem + ".ipynb")
    stem = m.group("stem") if m else stem
    return _COPY_NAMES.sub("", stem).strip()


def _resubmissions(files: list[tuple[str, Path, int]]) -> tuple[
        list[tuple[str, Path]], list[str]]:
    """Keep the latest of each file uploaded more than once (``name-N.ext``, highest N,
    then highest submission number); ``files``: ``(file name, path, submission id)``."""
    groups: dict[str, list[tuple[int, int, str, Path]]] = {}
    for fname, path, sid in files:
        m = RESUBMITTED.match(fname)
        base, n = (m.group("stem") + m.group("ext"), int(m.group("n"))) if m else (fname, 0)
        groups.setdefault(base, []).append((n, sid, fname, path))
    kept, notes = [], []
    for base, versions in sorted(groups.items()):
        versions.sort()
        n, _, fname, path = versions[-1]
        if len(versions) > 1:
            dropped = ", ".join(v[2] for v in versions[:-1])
            notes.append(f"resubmitted: graded {fname}, the latest; left out {dropped}")
        if n:
            notes.append(f"{fname} (Canvas's name for a file uploaded again) graded as {base}")
            kept.append((base, path))
        else:
            kept.append((fname, path))
    return kept, notes


def _collect(root: Path, layout: str, known: list[str],
             asked: list[str] | None) -> tuple[list[Submission], list[str], list[str]]:
    """``(submissions, assignments, notes)`` of an unpacked download in ``layout``."""
    entries = _entries(root)
    notes: list[str] = []
    subs: list[Submission] = []
    if layout == "nbgrader":
        names = sorted(asked or {a for d in entries if d.is_dir() for a in known
                                 if (d / a).is_dir()})
        for d in entries:
            if not d.is_dir():
                notes.append(f"left out {d.name} (not a student folder)")
                continue
            for a in names:
                subs.append(Submission(d.name, a, lms_id=d.name,
                                       files=_notebooks(d / a) if (d / a).is_dir() else []))
        return subs, names, notes

    if layout == "canvas":
        per: dict[str, dict] = {}
        for p in entries:
            m = CANVAS_FILE.match(p.name) if p.is_file() else None
            if not m:
                notes.append(f"left out {p.name} (not named as Canvas names submissions)")
                continue
            s = per.setdefault(m["uid"], {"login": m["login"], "late": False, "files": []})
            s["late"] = s["late"] or bool(m["late"])
            s["files"].append((m["file"], p, int(m["sid"])))
        a = _assignment(asked, [f for s in per.values() for f, _, _ in s["files"]
                                if f.endswith(".ipynb")], known, "Canvas")
        for uid, s in sorted(per.items()):
            kept, rnotes = _resubmissions(s["files"])
            sub = Submission(uid, a, name=s["login"], late=s["late"], lms_id=uid, notes=rnotes)
            sub.files = [p for _, p in kept]
            sub.staged_names = {str(p): fn for fn, p in kept}
            subs.append(sub)
        return subs, [a], notes

    if layout == "moodle":
        per = {}
        for p in entries:
            m = MOODLE_ENTRY.match(p.name)
            if not m:
                notes.append(f"left out {p.name} (not named as Moodle names submissions)")
                continue
            s = per.setdefault(m["id"], {"name": m["name"].replace("_", " "), "files": []})
            if p.is_dir():
                s["files"] += [(str(q.relative_to(p)), q) for q in sorted(p.rglob("*"))
                               if q.is_file() and not q.is_symlink()
                               and not any(x in IGNORED_NAMES for x in q.relative_to(p).parts)]
            elif m["file"]:
                s["files"].append((m["file"], p))
        a = _assignment(asked, [Path(f).name for s in per.values() for f, _ in s["files"]
                                if f.endswith(".ipynb")], known, "Moodle")
        for pid, s in sorted(per.items(), key=lambda kv: int(kv[0])):
            name = "" if s["name"].startswith("Participant") else s["name"]
            sub = Submission(pid, a, name=name, lms_id=pid, files=[q for _, q in s["files"]])
            sub.staged_names = {str(q): f for f, q in s["files"]}
            subs.append(sub)
        return subs, [a], notes

    if layout == "plain":
        loose = [p for p in entries if p.is_file() and p.suffix == ".ipynb"]
        folders = [p for p in entries if p.is_dir()]
        names = [p.name for d in folders for p in d.glob("*.ipynb")] + [p.name for p in loose]
        a = _assignment(asked, names, known, "plain")
        for p in loose:  # <student>.ipynb: the file is named after the student
            sid = _plain_id(p.stem)
            sub = Submission(sid, a, name=p.stem if sid != p.stem else "", lms_id=sid, files=[p])
            sub.staged_names = {str(p): f"{a}.ipynb"}
            subs.append(sub)
        for d in folders:
            sid = _plain_id(d.name)
            subs.append(Submission(sid, a, name=d.name if sid != d.name else "", lms_id=sid,
                                   files=_notebooks(d)))
        for p in entries:
            if p.is_file() and p.suffix != ".ipynb":
                notes.append(f"left out {p.name} (not a notebook)")
        return subs, [a], notes
    raise LMSError(f"unknown layout {layout!r}; one of {', '.join(LAYOUTS)}")


# --------------------------------------------------------------------------------------
# Roster

@dataclass
class Enrolled:
    """A roster row: the LMS id, the name, and (Moodle worksheets) the late flag."""
    lms_id: str
    name: str = ""
    late: bool | None = None
    email: str = ""


def read_roster(path: Path) -> list[Enrolled]:
    """Every enrolled student of a roster CSV: a Canvas gradebook export (columns
    ``Student``, ``ID``; its ``Points Possible`` row skipped), a Moodle grading worksheet
    (``Identifier`` = ``Participant <id>``, ``Full name``, ``Status``: late when it says
    so) or a plain CSV with an ``id`` (or ``student``) column and optionally ``name``.
    Raises :class:`LMSError` naming the columns when none of these fits."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LMSError(f"roster {path} cannot be read ({exc})") from None
    rows = list(csv.DictReader(text.splitlines()))
    cols = {c.strip().lower(): c for c in (rows[0].keys() if rows else [])}
    out: list[Enrolled] = []
    if "identifier" in cols and "full name" in cols:  # Moodle grading worksheet
        for r in rows:
            ident = (r[cols["identifier"]] or "").strip()
            m = re.search(r"(\d+)\s*$", ident)
            if not m:
                continue
            status = r.get(cols.get("status", ""), "") or ""
            out.append(Enrolled(m.group(1), (r[cols["full name"]] or "").strip(),
                                "late" in status.lower() if status else None,
                                (r.get(cols.get("email address", ""), "") or "").strip()))
    elif "student" in cols and "id" in cols:  # Canvas gradebook export
        for r in rows:
            uid = (r[cols["id"]] or "").strip()
            if uid.isdigit():  # skips "Points Possible" and "Test Student"-less meta rows
                out.append(Enrolled(uid, (r[cols["student"]] or "").strip()))
    elif "id" in cols or "student" in cols:
        key = cols.get("id") or cols["student"]
        for r in rows:
            if (r[key] or "").strip():
                out.append(Enrolled(r[key].strip(), (r.get(cols.get("name", ""), "") or "").strip()))
    else:
        raise LMSError(f"roster {path.name}: cannot find the students' ids (columns "
                       f"{', '.join(cols.values()) or 'none'}); expected a Canvas gradebook "
                       "export (Student, ID), a Moodle grading worksheet (Identifier, Full "
                       "name) or a CSV with an id column")
    if not out:
        raise LMSError(f"roster {path.name} lists no student")
    return out


# --------------------------------------------------------------------------------------
# Staging: the grade command's layout

def stage(submissions: Path, work: Path, known: list[str], *, layout: str | None = None,
          assignments: list[str] | None = None, roster: Path | None = None) -> Staged:
    """Take in ``submissions`` (a folder or a ``.zip``) and write, under ``work/staged``,
    ``<student>/<assignment>/<file>`` copies for course_tools.grade (a folder already in
    nbgrader's layout, without a roster, is used where it is) (each notebook under the
    name the download gave it, a Canvas resubmission's ``-N`` removed; a plain
    ``<student>.ipynb`` as ``<assignment>.ipynb``).  ``known``: the course's assignments;
    ``layout``: force one of :data:`LAYOUTS`; ``assignments``: ``--assignment``;
    ``roster``: every enrolled student gets a folder, empty (so ``missing``) when they
    submitted nothing.  ``work`` must be a fresh folder; nothing is written outside it.
    Raises :class:`LMSError`."""
    submissions, work = Path(submissions), Path(work)
    if layout is not None and layout not in LAYOUTS:
        raise LMSError(f"unknown --layout {layout!r}; one of {', '.join(LAYOUTS)}")
    if submissions.is_file() and submissions.suffix.lower() == ".zip":
        root = safe_extract(submissions, work / "unpacked")
    elif submissions.is_dir():
        root = submissions
    else:
        raise LMSError(f"SUBMISSIONS {submissions} is neither a folder nor a .zip file")
    root = _unwrap(root, known)
    found = layout or detect_layout(root, known)
    unknown = [a for a in assignments or [] if a not in known]
    if unknown:
        raise LMSError(f"unknown assignment(s) {', '.join(unknown)}; the course has "
                       f"{', '.join(known) or 'none'}")
    subs, names, notes = _collect(root, found, known, assignments)
    if not names:
        raise LMSError(f"no folder in {submissions} is named after an assignment "
                       f"({', '.join(known) or 'none in the course'}); pass --assignment")
    if found == "nbgrader" and roster is None and root.is_relative_to(submissions) and \
            submissions.is_dir():
        return Staged(root, found, names, subs, notes)  # graded where it is, as before
    staged = work / "staged"
    staged.mkdir(parents=True)
    taken: set[str] = set()
    for sub in subs:
        if sub.student in taken and found != "nbgrader":
            sub.notes.append("a second folder for this id: merged")
        taken.add(sub.student)
        dest = staged / sub.student / sub.assignment
        if found == "nbgrader":  # copy the student's whole folder as it is
            src = root / sub.student
            if not (staged / sub.student).exists():
                _copy_regular(src, staged / sub.student)
            continue
        dest.mkdir(parents=True, exist_ok=True)
        for p in sub.files:
            rel = sub.staged_names.get(str(p), p.name)
            target = dest / rel
            if _inside(target, dest) and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, target)
    if roster is not None:
        enrolled = read_roster(roster)
        have = {s.student for s in subs}
        info = {e.lms_id: e for e in enrolled}
        for sub in subs:
            e = info.get(sub.student)
            if e is None:
                sub.notes.append("not on the roster")
                continue
            sub.name = sub.name if sub.name and found != "canvas" else (e.name or sub.name)
            if sub.late is None and e.late is not None:
                sub.late = e.late
        for e in enrolled:
            if e.lms_id not in have:
                # Canvas flags each file late or not; nothing sent is not late (Canvas's own
                # word for it is "missing", a status of its own beside "late")
                late = e.late if e.late is not None else (False if found == "canvas" else None)
                for a in names:
                    subs.append(Submission(e.lms_id, a, name=e.name, late=late,
                                           lms_id=e.lms_id, roster_only=True))
                (staged / e.lms_id).mkdir(exist_ok=True)
    return Staged(staged, found, names, subs, notes)


def _inside(p: Path, root: Path) -> bool:
    p, root = Path(os.path.abspath(p)), Path(os.path.abspath(root))
    return p == root or root in p.parents


def _copy_regular(src: Path, dst: Path) -> None:
    """Copy the regular files and folders under ``src`` (symbolic links left out)."""
    for r, dirs, files in os.walk(src, followlinks=False):
        rel = Path(r).relative_to(src)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(r, d))]
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            p = Path(r) / f
            if stat.S_ISREG(os.lstat(p).st_mode):
                shutil.copyfile(p, dst / rel / f)
            elif os.path.islink(p):  # keep the link itself, for intake to name it
                os.symlink(os.readlink(p), dst / rel / f)


def annotate(reports, staged: Staged, layout_note: bool = True) -> None:
    """Give each :class:`~course_tools.feedback.Report` its student's LMS id, name and late
    flag, and the intake notes (resubmissions, renames, roster) in front of its detail."""
    info = staged.by_student()
    for r in reports:
        sub = info.get((r.student, r.assignment))
        if sub is None:
            continue
        r.lms_id, r.name, r.late = sub.lms_id or r.student, sub.name, sub.late
        extra = list(sub.notes)
        if sub.late:
            extra.append(f"late (the {staged.layout} download says so)")
        if not extra:
            continue
        for n in reversed(extra):
            if n not in r.notes:
                r.notes.insert(0, n)
        r.detail = "; ".join(x for x in [*extra, r.detail] if x)
