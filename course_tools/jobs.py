"""Running grading jobs in N worker processes, each under a wall-clock budget.

A job (:class:`Job`) is one student's one assignment, graded by
:func:`course_tools.worker.run_job` in a child process.  :func:`run_all` keeps at most ``n``
children running; a child that outlives its budget is killed with its whole process group,
and so is its kernel (jupyter_client starts kernels in a session of their own; the worker
writes the kernel's pid into the job's progress file).  Kernels of finished jobs are killed
too, with anything a submission left running in their group.

Children are forked from the grade command (no start-up cost: nbgrader is already imported)
when the platform has ``os.fork`` and the grade command runs a single thread; otherwise, or
with ``COURSE_GRADE_SPAWN=subprocess``, they are started as ``python -m course_tools.worker``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Job:
    """One grading job and, once run, what happened to its process."""
    student: str
    assignment: str
    dir: Path
    spec: dict
    budget: float
    reference: bool = False
    # filled in by run_all
    exit_code: int | None = None
    over_budget: bool = False
    seconds: float = 0.0
    kernel_pids: list[int] = field(default_factory=list)

    @property
    def progress(self) -> Path:
        return Path(self.spec["progress"])

    @property
    def result_path(self) -> Path:
        return Path(self.spec["result"])

    def result(self) -> dict | None:
        try:
            return json.loads(self.result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def events(self) -> list[dict]:
        """The progress file's events (a torn last line is skipped)."""
        out = []
        try:
            text = self.progress.read_text(encoding="utf-8", errors="replace")
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


def _kernel_pids(job: Job) -> list[int]:
    return [int(e["pid"]) for e in job.events()
            if e.get("event") == "kernel" and isinstance(e.get("pid"), int) and e["pid"] > 1]


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def use_fork() -> bool:
    """Fork children (True) or start them as subprocesses (False)?"""
    if os.environ.get("COURSE_GRADE_SPAWN") == "subprocess":
        return False
    return hasattr(os, "fork") and threading.active_count() == 1


class _Child:
    """A running job: a forked child or a subprocess, leading its own process group."""

    def __init__(self, job: Job, fork: bool):
        from .worker import run_job

        self.job = job
        self.start = time.monotonic()
        self.proc = None
        if fork:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                run_job(job.spec, forked=True)
            self.pid = pid
        else:
            spec_path = job.dir / "job.json"
            spec_path.write_text(json.dumps(job.spec), encoding="utf-8")
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "course_tools.worker", str(spec_path)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, cwd=str(job.dir))
            self.pid = self.proc.pid

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while running."""
        if self.proc is not None:
            return self.proc.poll()
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def kill(self) -> None:
        _killpg(self.pid)
        for pid in _kernel_pids(self.job):
            _killpg(pid)


def run_all(jobs: list[Job], n: int, on_done=None, poll: float = 0.05) -> None:
    """Run ``jobs`` (in order) with at most ``n`` at a time; each job's fields
    (``exit_code``, ``over_budget``, ``seconds``, ``kernel_pids``) are filled in.
    ``on_done(job)`` is called as each finishes."""
    if n < 1:
        raise ValueError(f"jobs must be at least 1, got {n}")
    fork = use_fork()
    queue = list(jobs)
    running: list[_Child] = []
    try:
        while queue or running:
            while queue and len(running) < n:
                running.append(_Child(queue.pop(0), fork))
            time.sleep(poll)
            for child in list(running):
                code = child.poll()
                elapsed = time.monotonic() - child.start
                if code is None and elapsed > child.job.budget:
                    child.job.over_budget = True
                    child.kill()
                    code = _reap(child)
                if code is None:
                    continue
                job = child.job
                job.exit_code, job.seconds = code, round(elapsed, 2)
                job.kernel_pids = _kernel_pids(job)
                for pid in job.kernel_pids:  # whatever a submission left running
                    _killpg(pid)
                running.remove(child)
                if on_done:
                    on_done(job)
    finally:
        for child in running:  # interrupted (Ctrl-C): leave nothing behind
            child.kill()
            _reap(child)


def _reap(child: _Child) -> int:
    for _ in range(200):
        code = child.poll()
        if code is not None:
            return code
        time.sleep(0.01)
    return -signal.SIGKILL
