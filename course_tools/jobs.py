"""Running grading jobs on this machine, ``n`` at a time, each under its wall-clock budget.

A job is a :class:`~course_tools.protocol.JobSpec`; :func:`run_all` runs each in a child
process of its own (:class:`course_tools.worker.LocalJob`: forked from the grade command, so
nbgrader is imported once, or started as ``python -m course_tools.worker`` where there is no
fork or with ``COURSE_GRADE_SPAWN=subprocess``) and hands back its
:class:`~course_tools.protocol.JobResult`.  A child that outlives its budget is killed with
its process group, its kernel's and the job's cgroup; kernels of finished jobs are killed
too, with anything a submission left running.
"""
from __future__ import annotations

import signal
import threading
import time
from typing import Callable

from .protocol import JobResult, JobSpec
from .worker import LocalJob, use_fork


def run_all(specs: list[JobSpec], n: int, on_done: Callable[[JobSpec, JobResult], None]
            | None = None, poll: float = 0.05) -> tuple[dict[str, JobResult], bool]:
    """Run ``specs`` (in order) with at most ``n`` at a time; returns ``({job_id: result},
    interrupted)``: on Ctrl-C the jobs in flight are killed and the finished ones returned.
    ``on_done(spec, result)`` is called as each finishes."""
    if n < 1:
        raise ValueError(f"jobs must be at least 1, got {n}")
    fork = use_fork()
    queue = list(specs)
    running: list[LocalJob] = []
    results: dict[str, JobResult] = {}
    stop = []
    # Ctrl-C sets a flag the loop reads between steps, so it never lands half-way through
    # starting or collecting a job
    previous = (signal.signal(signal.SIGINT, lambda *a: stop.append(True))
                if threading.current_thread() is threading.main_thread() else None)
    try:
        while (queue or running) and not stop:
            while queue and len(running) < n:
                running.append(LocalJob(queue.pop(0), fork=fork))
            time.sleep(poll)
            for job in list(running):
                code = job.check_budget()
                if code is None:
                    continue
                running.remove(job)
                result = job.result(code)
                results[job.spec.job_id] = result
                if on_done:
                    on_done(job.spec, result)
    except KeyboardInterrupt:
        stop.append(True)
    finally:
        for job in running:  # interrupted: leave nothing behind
            job.kill()
            job.result(job.reap())
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return results, bool(stop)
