"""The grading job's boundary, defined once: what goes into a job and what comes out.

A *job* is one student's one assignment (or, for ``reference=True``, the model answer),
graded by :func:`course_tools.worker.run_job` wherever it runs: a local worker process or
(later) a cluster worker.  A job is self-contained: a :class:`JobSpec` carries everything the
worker needs (the normalized notebooks and other files, the gradebook made by
``generate_assignment`` with the test cells and hidden tests, the course's nbgrader config,
the limits, the sandbox, and the digest of the ``course_lib`` it must run against), and a
:class:`JobResult` everything the grade command needs (per-cell facts, the autograded
notebooks, nbgrader's own scores, the log, what the sandbox saw).  No file system is shared.

Both travel as JSON (:meth:`JobSpec.to_json`, :meth:`JobResult.to_json`) and are validated
when read (:meth:`JobSpec.from_json`, :meth:`JobResult.from_json` raise :class:`ProtocolError`
naming the field): a result is only trusted in the shape defined here.

:class:`Status` is the one list of statuses a row of ``grades.csv`` can have.
"""
from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum


class Status(StrEnum):
    """The status of one student's one assignment (a row of ``grades.csv``)."""
    GRADED = "graded"
    BLANK = "blank"
    TIMEOUT = "timeout"
    KERNEL_DIED = "kernel_died"
    MEMORY_LIMIT = "memory_limit"
    PROCESS_LIMIT = "process_limit"
    DISK_LIMIT = "disk_limit"
    MISSING = "missing"
    MISNAMED = "misnamed"
    INVALID_JSON = "invalid_json"
    INVALID_NOTEBOOK = "invalid_notebook"
    BAD_STUDENT_ID = "bad_student_id"
    AUTOGRADE_ERROR = "autograde_error"
    INTERRUPTED = "interrupted"


class Sandbox(StrEnum):
    """Where learner code runs: in bubblewrap (the default) or, when asked, unsandboxed."""
    BWRAP = "bwrap"
    NONE = "none"


class ProtocolError(ValueError):
    """A job spec or result that does not have the shape this module defines."""


def _check(obj, name: str, kind, where: str):
    if not isinstance(obj, kind) or (kind is int and isinstance(obj, bool)):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ProtocolError(f"{where}: field {name!r} should be {want}, got "
                            f"{type(obj).__name__}")
    return obj


def _object(text: str | bytes, where: str, typed) -> dict:
    """``text`` as a JSON object whose fields ``typed`` (``(name, type), ...``) have their types,
    else :class:`ProtocolError` naming ``where`` and the field."""
    try:
        d = json.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"{where}: not JSON ({exc})") from None
    if not isinstance(d, dict):
        raise ProtocolError(f"{where}: should be an object")
    for name, kind in typed:
        _check(d.get(name), name, kind, where)
    return d


@dataclass(frozen=True)
class Limits:
    """What one job may use.  Seconds, characters and bytes; 0 means no limit of that kind.

    ``memory`` is the address space of each process (``RLIMIT_AS``: an allocation past it
    fails with ``MemoryError``, and the notebook goes on); ``job_memory`` the memory of the
    whole job (a cgroup, where one can be made: past it the kernel is killed);
    ``processes`` the tasks of the whole job (threads included); ``scratch`` the size of the
    sandbox's tmpfs scratch space; ``file_size`` the largest file a job may write."""
    cell_timeout: int
    notebook_timeout: float
    max_cell_output: int
    max_notebook_output: int
    memory: int
    job_memory: int
    processes: int
    scratch: int
    file_size: int

    @classmethod
    def from_dict(cls, d: dict) -> "Limits":
        if not isinstance(d, dict):
            raise ProtocolError("limits: should be an object")
        for f in fields(cls):
            _check(d.get(f.name), f.name, (int, float) if f.type == "float" else int, "limits")
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass
class JobSpec:
    """Everything one job needs (see the module docstring).

    ``notebooks`` maps a notebook's name (without ``.ipynb``) to its JSON (nbformat 4);
    ``files`` a relative path to the base64 of a file that goes beside them (the student's
    own extra files; for the reference, the assignment's); ``source_files`` likewise the
    assignment's non-notebook source files; ``gradebook`` is
    the base64 of the SQLite gradebook ``generate_assignment`` made (test cells, hidden tests
    included); ``config`` the text of the course's ``nbgrader_config.py``."""
    job_id: str
    student: str
    assignment: str
    reference: bool
    notebooks: dict
    files: dict
    source_files: dict
    gradebook: str
    config: str
    limits: Limits
    sandbox: Sandbox
    course_lib: str
    """Digest of the course_lib the kernels must import (:func:`course_tools.integrity.course_lib_fingerprint`)."""

    def to_json(self) -> str:
        d = asdict(self)
        d["sandbox"] = str(self.sandbox)
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str | bytes) -> "JobSpec":
        d = _object(text, "job spec", (
            ("job_id", str), ("student", str), ("assignment", str), ("reference", bool),
            ("notebooks", dict), ("files", dict), ("source_files", dict), ("gradebook", str),
            ("config", str), ("course_lib", str), ("sandbox", str)))
        try:
            sandbox = Sandbox(d["sandbox"])
        except ValueError:
            raise ProtocolError(f"job spec: unknown sandbox {d['sandbox']!r}") from None
        for k, v in [*d["files"].items(), *d["source_files"].items()]:
            if not isinstance(v, str) or k.startswith("/") or ".." in k.split("/"):
                raise ProtocolError(f"job spec: bad file entry {k!r}")
        for k, v in d["notebooks"].items():
            if not isinstance(v, dict) or "/" in k or k.startswith("."):
                raise ProtocolError(f"job spec: bad notebook entry {k!r}")
        return cls(**{**d, "limits": Limits.from_dict(d.get("limits")), "sandbox": sandbox})

    @staticmethod
    def decode(files: dict) -> dict[str, bytes]:
        """``files`` or ``source_files`` as bytes."""
        return {k: base64.b64decode(v) for k, v in files.items()}


def encode(data: bytes) -> str:
    """Bytes as the base64 text a spec carries."""
    return base64.b64encode(data).decode("ascii")


@dataclass
class SandboxFacts:
    """What the sandbox saw of one job (all zero without a sandbox)."""
    kind: str = ""
    """``bwrap`` or ``none``."""
    cgroup: str = ""
    """``v1``, ``v2`` or "" (no cgroup could be made: per-process limits only)."""
    peak_scratch: int = 0
    memory_events: int = 0
    oom_kills: int = 0
    process_cap_hits: int = 0
    survivors: int = 0
    """Processes still in the job's cgroup after its kernel was gone (killed then)."""
    errors: list = field(default_factory=list)


@dataclass
class JobResult:
    """Everything the grade command needs from one job (see the module docstring).

    ``events`` are the per-cell facts (:class:`course_tools.preprocessors.GuardedExecute`),
    in order; ``autograded`` maps a notebook's name to the notebook as nbgrader graded it;
    ``nbgrader_scores`` ``"notebook/grade_id"`` to ``[auto_score or None, max_score]``."""
    job_id: str
    ok: bool = False
    error: str = ""
    refused: str = ""
    """Why the job was not run at all (a worker with another course_lib, one that cannot
    build the sandbox, a job that killed the workers grading it): said as it is."""
    events: list = field(default_factory=list)
    autograded: dict = field(default_factory=dict)
    nbgrader_scores: dict = field(default_factory=dict)
    log: str = ""
    sandbox: SandboxFacts = field(default_factory=SandboxFacts)
    exit_code: int | None = None
    over_budget: bool = False
    seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> "JobResult":
        d = _object(text, "job result", (
            ("job_id", str), ("ok", bool), ("error", str), ("refused", str), ("events", list),
            ("autograded", dict), ("nbgrader_scores", dict), ("log", str),
            ("over_budget", bool), ("seconds", (int, float)), ("sandbox", dict)))
        if d.get("exit_code") is not None:
            _check(d["exit_code"], "exit_code", int, "job result")
        if not all(isinstance(e, dict) for e in d["events"]):
            raise ProtocolError("job result: every event should be an object")
        known = {f.name for f in fields(SandboxFacts)}
        sandbox = SandboxFacts(**{k: v for k, v in d["sandbox"].items() if k in known})
        return cls(**{**d, "sandbox": sandbox})
