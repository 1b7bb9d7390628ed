"""One grading job: nbgrader's autograde of one :class:`~course_tools.protocol.JobSpec`, in a
process and a private folder of its own, with learner code in the sandbox.

:func:`run_job` is the whole job on whatever machine runs it: it makes a private folder,
starts a child process (``os.fork`` where available, else ``python -m course_tools.worker``)
that runs :func:`execute` there, enforces the wall-clock budget from outside (killing the
child's process group, the kernel's and the job's cgroup), collects the
:class:`~course_tools.protocol.JobResult` (:func:`collect`) and removes the folder.
:mod:`course_tools.jobs` runs many at once the same way (:class:`LocalJob`).

:func:`execute`, in the child:

1. starts a new session (the parent kills the job by its process group);
2. checks that this machine's ``course_lib`` is the one the spec was made against (else the
   job is refused, with the two digests in its error);
3. writes an nbgrader root from the spec: the course config, the gradebook (test cells and
   hidden tests, which stay outside the sandbox), the assignment's other files and the
   student's notebooks in ``submitted/<student>/<assignment>/``;
4. limits the size of any file (``RLIMIT_FSIZE``) and each process's address space
   (``RLIMIT_AS``, ``limits.memory``);
5. for a sandboxed job, makes the job's cgroup (:class:`course_tools.sandbox.JobCgroup`: its
   processes and memory capped) and a kernel spec that starts the kernel inside bubblewrap
   (:mod:`course_tools.sandbox`); its sockets are Unix sockets (``ipc`` transport);
6. runs nbgrader's ``Autograde`` with course_tools.preprocessors in its preprocessor lists
   and ``COURSE_CHECK_RECORDS=1`` in the kernel's environment; the per-cell facts go to
   ``progress.jsonl`` in the private folder, which the kernel cannot see;
7. writes ``result.json``: whether nbgrader finished, its error if not, the scores nbgrader
   itself saved (a cross-check), the autograded notebooks, what the sandbox saw.
"""
from __future__ import annotations

import atexit
import base64
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from course_lib.checks.records import ENV as RECORDS_ENV

from .protocol import JobResult, JobSpec, ProtocolError, Sandbox, SandboxFacts

MAX_LOG_CHARS = 200_000
MAX_RESULT_BYTES = 64 * 2**20
"""A result file larger than this is not read (an honest one, outputs capped, is far smaller)."""
CGROUP_PREFIX = "course-grade-"


def cgroup_name(job_id: str) -> str:
    """The name of a job's cgroup (unique per grading run and job)."""
    return f"{CGROUP_PREFIX}{job_id}"


def _expected_noise(record: logging.LogRecord) -> bool:
    """Drop nbgrader's warning that a test cell's checksum changed: a test cell with hidden
    tests always differs from the release's copy, so it is said for every student; an edited
    test cell is reported by the intake (and restored by nbgrader) anyway."""
    return not (record.levelno == logging.WARNING
                and str(record.msg).startswith("Attribute '%s' for cell %s has changed!")
                and record.args and record.args[0] == "checksum")


def _paths(d: Path) -> dict[str, Path]:
    return {"root": d / "root", "progress": d / "progress.jsonl", "result": d / "result.json",
            "log": d / "log.txt", "sandbox": d / "sandbox.json", "spec": d / "job.json",
            "jupyter": d / "jupyter", "sock": d / "k"}


def write_root(spec: JobSpec, root: Path) -> Path:
    """An nbgrader root for the job; returns the submission folder."""
    (root / "source" / spec.assignment).mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(spec.config, encoding="utf-8")
    (root / "gradebook.db").write_bytes(base64.b64decode(spec.gradebook))
    sub = root / "submitted" / spec.student / spec.assignment
    sub.mkdir(parents=True)
    for folder, files in ((root / "source" / spec.assignment, spec.source_files),
                          (sub, spec.files)):
        for rel, data in JobSpec.decode(files).items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)
    for name, nb in spec.notebooks.items():
        (sub / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return sub


def job_config(spec: JobSpec, d: Path):
    """The traitlets config for one job: the course's ``nbgrader_config.py`` with the grading
    overrides (timeouts, output caps, preprocessor lists, worker root, the kernel)."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput,
                                        IgnorePattern, LimitOutput, OverwriteCells,
                                        OverwriteKernelspec, SaveAutoGrades)

    from . import load_config
    from .preprocessors import GuardedExecute, NoPartialCredit, SetAsideStderr

    p = _paths(d)
    config = load_config(p["root"])
    config.CourseDirectory.root = str(p["root"])
    config.CourseDirectory.source_directory = "source"
    config.CourseDirectory.assignment_id = spec.assignment
    config.CourseDirectory.student_id = spec.student
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
    lim = spec.limits
    config.GuardedExecute.timeout = int(lim.cell_timeout)
    config.GuardedExecute.interrupt_on_timeout = True
    config.GuardedExecute.iopub_timeout = 5
    config.GuardedExecute.progress_path = str(p["progress"])
    config.GuardedExecute.shutdown_kernel = "immediate"  # a graceful stop costs seconds
    config.GuardedExecute.startup_timeout = 30
    # Unix sockets: TCP ports picked at random collide when kernels start at once on a busy
    # machine, and a sandboxed kernel has no network to reach the worker by anyway
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(p["sock"] / "kernel")
    if spec.sandbox == Sandbox.BWRAP:
        from .sandbox import KERNEL_NAME
        config.GuardedExecute.kernel_name = KERNEL_NAME
    else:
        p["sock"].mkdir(exist_ok=True)
    config.GuardedExecute.max_cell_output = int(lim.max_cell_output)
    config.GuardedExecute.max_notebook_output = int(lim.max_notebook_output)
    config.LimitOutput.max_lines = 1000
    return config


def _sandbox_setup(spec: JobSpec, d: Path):
    """Make the job's cgroup and the kernel spec that starts kernels in bubblewrap."""
    from . import sandbox

    p = _paths(d)
    lim = spec.limits
    group = sandbox.JobCgroup.create(cgroup_name(spec.job_id), lim.processes, lim.job_memory)
    cfg = sandbox.SandboxConfig(
        bwrap=sandbox.bwrap_path() or "bwrap", ro_paths=sandbox.default_ro_paths(),
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        socket_dir=str(p["sock"]), report=str(p["sandbox"]), scratch=lim.scratch,
        processes=lim.processes, memory=lim.job_memory, cgroup_kind=group.kind,
        cgroup_dirs=[str(x) for x in group.dirs], font_cache=sandbox.font_cache())
    cfg.to_file(d / "sandbox-config.json")
    sandbox.kernel_spec(p["jupyter"], d / "sandbox-config.json")
    os.environ["JUPYTER_PATH"] = str(p["jupyter"])
    os.environ["JUPYTER_RUNTIME_DIR"] = str(d / "runtime")  # connection files: private
    return group


def _autograde(spec: JobSpec, d: Path) -> dict:
    """Run nbgrader's Autograde for the job; returns the result's fields."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory

    from . import use_venv_path

    use_venv_path()
    config = job_config(spec, d)
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
    result = {"ok": True, "error": "", "nbgrader_scores": {}, "autograded": {}}
    logger.info("job start: %s/%s", spec.student, spec.assignment)
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
    root = _paths(d)["root"]
    try:
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            try:
                sub = gb.find_submission(spec.assignment, spec.student)
                result["nbgrader_scores"] = {
                    f"{nb.name}/{g.name}": [None if g.auto_score is None else float(g.auto_score),
                                            float(g.max_score)]
                    for nb in sub.notebooks for g in nb.grades}
            except MissingEntry:
                pass
    except Exception:
        result["error"] += "\n(reading the worker gradebook failed)\n" + traceback.format_exc()[-2000:]
    graded = root / "autograded" / spec.student / spec.assignment
    for name in spec.notebooks:
        f = graded / f"{name}.ipynb"
        if f.is_file():
            result["autograded"][name] = json.loads(f.read_text(encoding="utf-8"))
    return result


def _die_with_parent() -> None:
    """Be killed when the process that started this job dies (a killed grade command or Dask
    worker leaves no job behind; the sandbox's launcher is tied to this process the same way)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os._exit(3)


def execute(spec: JobSpec, d: Path, forked: bool = False) -> None:
    """Run one job in the private folder ``d`` (see the module docstring); writes
    ``d/result.json``.  With ``forked=True`` this is a forked child: it never returns
    (``os._exit``), so none of the parent's cleanup runs twice."""
    code = 0
    p = _paths(Path(d))
    group = None
    try:
        if forked:
            os.setsid()
        _die_with_parent()
        log = os.open(p["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)

        result: dict = {"ok": False, "error": "", "nbgrader_scores": {}, "autograded": {}}
        refused = refusal(spec)
        if refused:
            result["refused"] = refused
        else:
            write_root(spec, p["root"])
            import resource

            lim = spec.limits
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size, lim.file_size))
            if lim.memory:
                resource.setrlimit(resource.RLIMIT_AS, (lim.memory, lim.memory))
            os.environ[RECORDS_ENV] = "1"
            os.environ.setdefault("MPLBACKEND", "Agg")
            os.environ.pop("JPY_PARENT_PID", None)
            if spec.sandbox == Sandbox.BWRAP:
                group = _sandbox_setup(spec, p["root"].parent)
            result = _autograde(spec, p["root"].parent)
        if group is not None:
            result["cgroup"] = {**group.counters(), "survivors": group.destroy()}
        tmp = str(p["result"]) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f)
        os.replace(tmp, p["result"])
    except BaseException:
        code = 3
        try:
            traceback.print_exc()
        except Exception:
            pass
    finally:
        if group is not None:
            group.destroy()
        if forked:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    if code:
        raise SystemExit(code)


def refusal(spec: JobSpec) -> str:
    """Why this machine must not run ``spec`` ("" if it may): its course_lib is not the one
    the spec was made against, or the spec asks for a sandbox this machine cannot build."""
    import socket

    from .integrity import course_lib_fingerprint, kernels_course_lib_problem

    mine = course_lib_fingerprint()
    if mine != spec.course_lib:
        return (f"the worker on {socket.gethostname()} has another course_lib (digest "
                f"{mine[:12]}, the grade command's {spec.course_lib[:12]}): install the same "
                "version of the course on every worker")
    if problem := kernels_course_lib_problem(spec.sandbox == Sandbox.BWRAP):
        return f"the worker on {socket.gethostname()}: {problem}"
    if spec.sandbox == Sandbox.BWRAP:
        from .sandbox import SandboxUnavailable, probe
        try:
            probe()
        except SandboxUnavailable as exc:
            return f"the worker on {socket.gethostname()} cannot build the sandbox: {exc}"
    return ""


def events(progress: Path) -> list[dict]:
    """The progress file's events (a torn last line is skipped)."""
    out = []
    try:
        text = progress.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def kernel_pids(d: Path) -> list[int]:
    """Pids of the kernels (or sandbox launchers) the job started, from its progress file."""
    return [int(e["pid"]) for e in events(_paths(d)["progress"])
            if e.get("event") == "kernel" and isinstance(e.get("pid"), int) and e["pid"] > 1]


def collect(spec: JobSpec, d: Path, exit_code: int | None, over_budget: bool,
            seconds: float) -> JobResult:
    """The :class:`JobResult` of a job whose process has ended (normally or not)."""
    from . import sandbox

    p = _paths(d)
    res = JobResult(job_id=spec.job_id, exit_code=exit_code, over_budget=over_budget,
                    seconds=round(seconds, 2))
    res.events = events(p["progress"])
    try:
        res.log = p["log"].read_text(encoding="utf-8", errors="replace")[-MAX_LOG_CHARS:]
    except OSError:
        pass
    raw = None
    try:
        if p["result"].stat().st_size <= MAX_RESULT_BYTES:
            raw = json.loads(p["result"].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    if isinstance(raw, dict):
        res.ok = raw.get("ok") is True
        res.error = str(raw.get("error", ""))
        res.refused = str(raw.get("refused", ""))
        if isinstance(raw.get("nbgrader_scores"), dict):
            res.nbgrader_scores = raw["nbgrader_scores"]
        if isinstance(raw.get("autograded"), dict):
            res.autograded = raw["autograded"]
    facts = SandboxFacts(kind=str(spec.sandbox))
    seen = sandbox.SandboxReport.read(p["sandbox"])
    if seen is not None:
        facts.cgroup, facts.peak_scratch = seen.cgroup, max(seen.peak_scratch, 0)
        if seen.error:
            facts.errors.append(seen.error)
    counters = (raw or {}).get("cgroup") if isinstance(raw, dict) else None
    if isinstance(counters, dict):
        for k in ("memory_events", "oom_kills", "process_cap_hits", "survivors"):
            if isinstance(counters.get(k), int):
                setattr(facts, k, counters[k])
    # a job killed over budget could not clean up: its cgroup is removed here
    facts.survivors += sandbox.destroy_leftovers(cgroup_name(spec.job_id), exact=True)
    res.sandbox = facts
    return res


# --- running one job in a child process --------------------------------------------------------

def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def use_fork() -> bool:
    """Fork children from this process (True), or start them from a fork server or as
    subprocesses (False)?  Forking is only safe from a single-threaded process."""
    import threading

    if os.environ.get("COURSE_GRADE_SPAWN") in ("subprocess", "forkserver"):
        return False
    return hasattr(os, "fork") and threading.active_count() == 1


_PRELOAD = ["course_tools.worker", "course_tools.preprocessors", "nbgrader.converters",
            "nbgrader.api", "nbclient", "jupyter_client", "course_lib.checks.records"]
"""Modules the fork server imports once, so each job starts without importing nbgrader."""


def _forkserver():
    """A multiprocessing context whose children fork from a single-threaded server that has
    nbgrader imported (for a multi-threaded parent such as a Dask worker), or None."""
    import multiprocessing as mp

    if os.environ.get("COURSE_GRADE_SPAWN") == "subprocess" or \
            "forkserver" not in mp.get_all_start_methods():
        return None
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def _serve(spec_json: str, d: str) -> None:
    """A fork server's child: one job (the spec travels as JSON, like everywhere else)."""
    execute(JobSpec.from_json(spec_json), Path(d), forked=True)


RUNNING: dict[str, "LocalJob"] = {}
"""The jobs this process is running, by job id (so a cancelled cluster run can stop them)."""


def kill_running(prefix: str) -> int:
    """Kill this process's running jobs whose id starts with ``prefix`` (their results are
    then collected and their folders removed as usual); returns how many."""
    jobs = [j for i, j in list(RUNNING.items()) if i.startswith(prefix)]
    for job in jobs:
        job.kill()
    return len(jobs)


JOBS_DIR_PREFIX = "course-jobs-"
"""Each process's job folders sit in ``<tmp>/course-jobs-<its pid>/``, so a process killed
before it could remove them (a Dask worker killed with SIGKILL) leaves them where the next
process to start a job finds and removes them (:func:`jobs_parent`)."""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists and is not a zombie (killed, not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc: trust kill
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def jobs_parent(tmp: Path | None = None) -> Path:
    """This process's folder for job folders under ``tmp`` (default: the system's), made on
    first use and removed at exit if empty.  Each call first removes the folders of this
    user's processes that are no longer running, with whatever their jobs left (a dead
    worker's jobs died with it: PR_SET_PDEATHSIG)."""
    base = Path(tmp or tempfile.gettempdir())
    mine = base / f"{JOBS_DIR_PREFIX}{os.getpid()}"
    from . import remove_tree
    for other in base.glob(f"{JOBS_DIR_PREFIX}*"):
        pid = other.name[len(JOBS_DIR_PREFIX):]
        try:
            if pid.isdigit() and other.stat().st_uid == os.getuid() and not _alive(int(pid)):
                remove_tree(other)
        except OSError:  # removed by another process meanwhile, or not ours to remove
            pass
    if not mine.is_dir():
        mine.mkdir(mode=0o700)
        atexit.register(_remove_if_empty, mine)
    return mine


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


class LocalJob:
    """One job running in a child process of this one, in a private folder of its own under
    :func:`jobs_parent` (removed by :meth:`result`).  The child leads its own process group."""

    def __init__(self, spec: JobSpec, fork: bool | None = None, tmp: Path | None = None):
        self.spec = spec
        self.dir = Path(tempfile.mkdtemp(prefix=f"job-{spec.job_id}-", dir=jobs_parent(tmp)))
        self.start = time.monotonic()
        self.proc = self.mp = None
        self._code: int | None = None
        self.over_budget = False
        RUNNING[spec.job_id] = self
        fork = use_fork() if fork is None else fork
        ctx = None if fork else _forkserver()
        if fork:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                execute(spec, self.dir, forked=True)
            self.pid = pid
        elif ctx is not None:
            self.mp = ctx.Process(target=_serve, args=(spec.to_json(), str(self.dir)),
                                  daemon=False)
            self.mp.start()
            self.pid = self.mp.pid
        else:
            _paths(self.dir)["spec"].write_text(spec.to_json(), encoding="utf-8")
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "course_tools.worker", str(_paths(self.dir)["spec"]),
                 str(self.dir)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, cwd=str(self.dir))
            self.pid = self.proc.pid

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while running."""
        if self.proc is not None:
            return self.proc.poll()
        if self.mp is not None:
            return self.mp.exitcode
        if self._code is None:  # a forked child, reaped once
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._code = (-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                              else os.WEXITSTATUS(status))
        return self._code

    def kill(self) -> None:
        """Kill the job: its process group, its kernels' and its cgroup."""
        from . import sandbox

        _killpg(self.pid)
        for pid in kernel_pids(self.dir):
            _killpg(pid)
        for left in sandbox.leftover_cgroups(cgroup_name(self.spec.job_id), exact=True):
            sandbox.kill_cgroup([left])  # removed once the job is collected

    def check_budget(self) -> int | None:
        """Poll; a job past its budget is killed (and reaped).  The exit code, or None."""
        code = self.poll()
        if code is None and self.elapsed > self.spec.limits.notebook_timeout:
            self.over_budget = True
            self.kill()
            code = self.reap()
        return code

    def reap(self) -> int:
        for _ in range(200):
            code = self.poll()
            if code is not None:
                return code
            time.sleep(0.01)
        return -signal.SIGKILL

    def result(self, code: int | None) -> JobResult:
        """Collect the result, kill whatever the job left, remove the private folder."""
        seconds = self.elapsed
        for pid in kernel_pids(self.dir):  # whatever a submission left running
            _killpg(pid)
        try:
            return collect(self.spec, self.dir, code, self.over_budget, seconds)
        finally:
            from . import remove_tree
            remove_tree(self.dir)
            RUNNING.pop(self.spec.job_id, None)


def run_job(spec: JobSpec, poll: float = 0.05) -> JobResult:
    """Run one job to the end on this machine (its budget enforced) and return its result."""
    job = LocalJob(spec)
    try:
        while (code := job.check_budget()) is None:
            time.sleep(poll)
    except BaseException:
        job.kill()
        job.reap()
        raise
    return job.result(code)


def main(argv: list[str] | None = None) -> int:
    """``python -m course_tools.worker JOB.json DIR``: run one job in DIR (the fallback where
    there is no ``os.fork``; the parent starts it in a new session)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m course_tools.worker JOB.json DIR", file=sys.stderr)
        return 2
    try:
        spec = JobSpec.from_json(Path(args[0]).read_text(encoding="utf-8"))
    except (OSError, ProtocolError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    execute(spec, Path(args[1]), forked=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
