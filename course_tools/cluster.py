"""Grading jobs on a Dask cluster (``dask.distributed``) instead of local worker processes.

    python -m course_tools.grade SUBMISSIONS --out OUT --scheduler tcp://HOST:8786

Each job travels whole: its :class:`~course_tools.protocol.JobSpec` (JSON) goes to a Dask
worker, which runs :func:`grade_remotely` (the job in a child process of its own, in the same
sandbox as local grading: :func:`course_tools.worker.run_job`) and sends back the
:class:`~course_tools.protocol.JobResult` (JSON).  Nothing is shared but the scheduler's
address: no file system, no pickled course objects.

Faults:

* a worker whose course_lib differs from the grade command's (the spec carries its digest),
  or that cannot build the sandbox, refuses the job: the job's result says why
  (``refused``), and the row reports it;
* a worker that dies while it runs a job (killed, its machine lost): the scheduler runs the
  job again elsewhere.  Each run of a job counts its starts on the scheduler (task
  metadata), so only a job that really ran when its worker died is charged, not one merely
  queued there; a job that has started twice and is started a third time refuses to run and
  is reported as having killed two workers; the rest of the class is graded.  (Dask's own
  ``allowed_failures`` also charges queued tasks, so the grade command raises it on the
  scheduler and leaves the decision to this count.);
* a scheduler that cannot be reached: :class:`ClusterError` naming the address, before
  anything is written;
* Ctrl-C: the jobs in flight are cancelled and what was graded so far is kept.

Start a cluster with ``dask scheduler`` and ``dask worker`` (course_tools/README.md).
"""
from __future__ import annotations

import socket
import sys
from typing import Callable

from .protocol import JobResult, JobSpec

RETRIES_AFTER_A_DEAD_WORKER = 1
"""How many times a job whose worker died is run again elsewhere."""


class ClusterError(RuntimeError):
    """The Dask scheduler cannot be reached or used (one line naming the address)."""


def connect(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` on the scheduler at ``address`` (``tcp://HOST:PORT``), with
    at least one worker; raises :class:`ClusterError` otherwise."""
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - pinned in requirements.txt
        raise ClusterError(f"dask.distributed is not installed ({exc})") from None
    try:
        client = Client(address, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                           .rstrip(": ")) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        client.close()
        raise ClusterError(f"the Dask scheduler at {address} has no workers: start some with "
                           f"`dask worker {address}`") from None
    return client


DASK_ALLOWED_FAILURES = 100
"""Set on the scheduler: Dask reschedules a task whose worker died this many times before it
gives up; the job's own start count (:func:`grade_remotely`) decides well before."""
_ATTEMPTS = "course-grade-attempts"


def _allow_failures(dask_scheduler=None, n: int = DASK_ALLOWED_FAILURES) -> int:
    """On the scheduler: raise ``allowed_failures`` (see :data:`DASK_ALLOWED_FAILURES`)."""
    dask_scheduler.allowed_failures = max(dask_scheduler.allowed_failures, n)
    return dask_scheduler.allowed_failures


def _forget(dask_scheduler=None, job_ids: tuple = ()) -> None:
    """On the scheduler: drop the start counts of finished jobs."""
    counts = dask_scheduler.task_metadata.get(_ATTEMPTS, {})
    for j in job_ids:
        counts.pop(j, None)


def _count_start(job_id: str) -> int:
    """On a Dask worker: count one more start of this job (on the scheduler); returns it."""
    from distributed import get_client, get_worker

    try:
        get_worker()
    except ValueError:  # called outside a Dask worker (a test, a direct call): one start
        return 1
    client = get_client()
    n = int(client.get_metadata([_ATTEMPTS, job_id], default=0)) + 1
    client.set_metadata([_ATTEMPTS, job_id], n)
    return n


def grade_remotely(spec_json: str) -> str:
    """On a Dask worker: run one job (validated, refused if this machine must not run it)
    and return its result as JSON."""
    from .protocol import JobSpec as Spec
    from .worker import refusal, run_job

    spec = Spec.from_json(spec_json)
    starts = _count_start(spec.job_id)
    if starts > RETRIES_AFTER_A_DEAD_WORKER + 1:
        return JobResult(job_id=spec.job_id, refused=(
            f"the Dask workers grading this notebook died {starts - 1} times while it ran "
            "(killed, or their machine lost), so it was not graded")).to_json()
    why = refusal(spec)
    if why:
        return JobResult(job_id=spec.job_id, refused=why).to_json()
    return run_job(spec).to_json()


def task_key(spec: JobSpec) -> str:
    """The Dask key of a job (names the student, so an instructor can follow it in the
    dashboard)."""
    who = "reference" if spec.reference else spec.student
    return f"grade-{who}-{spec.assignment}-{spec.job_id}"


def run_on_cluster(client, specs: list[JobSpec],
                   on_done: Callable[[JobSpec, JobResult], None] | None = None
                   ) -> tuple[dict[str, JobResult], bool]:
    """Run ``specs`` on the cluster; returns ``({job_id: result}, interrupted)``: on Ctrl-C
    the jobs in flight are cancelled and the finished ones returned."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    client.run_on_scheduler(_allow_failures)
    futures = {client.submit(grade_remotely, spec.to_json(), key=task_key(spec), pure=False,
                             retries=0): spec for spec in specs}
    results: dict[str, JobResult] = {}
    try:
        for fut in as_completed(list(futures), loop=client.loop):
            spec = futures[fut]
            try:
                result = JobResult.from_json(fut.result())
            except KilledWorker:
                result = JobResult(job_id=spec.job_id, refused=(
                    f"the Dask workers grading this notebook died {DASK_ALLOWED_FAILURES} "
                    "times (killed, or their machine lost), so it was not graded"))
            except Exception as exc:  # noqa: BLE001 - one job's failure is its row, not the run's
                line = (str(exc).strip().splitlines() or [""])[0][:300]
                result = JobResult(job_id=spec.job_id, error=(
                    f"the cluster could not run this job: {type(exc).__name__}: {line}"))
            results[spec.job_id] = result
            if on_done:
                on_done(spec, result)
    except KeyboardInterrupt:
        client.cancel([f for f in futures if not f.done()], force=True)
        # Dask cannot stop a task that is running: stop the jobs themselves, on every worker
        import os.path

        from .worker import kill_running
        try:
            client.run(kill_running, os.path.commonprefix([s.job_id for s in specs]))
        except Exception:  # noqa: BLE001 - a worker already gone has nothing to stop
            pass
        return results, True
    finally:
        try:
            client.run_on_scheduler(_forget, job_ids=tuple(s.job_id for s in specs))
        except Exception:  # noqa: BLE001 - bookkeeping only
            pass
    return results, False


def scheduling_overhead_ms(client, n: int = 50) -> float:
    """Milliseconds a trivial task takes to go through the scheduler and back (the mean of
    ``n``, one at a time): the cost the cluster adds to each job."""
    import time

    start = time.perf_counter()
    for i in range(n):
        client.submit(socket.gethostname, key=f"noop-{i}-{time.time_ns()}", pure=False).result()
    return 1000 * (time.perf_counter() - start) / n


class LoopbackCluster:
    """A Dask cluster of real processes on this machine's 127.0.0.1: ``dask scheduler`` (a
    port chosen at run time, found through its scheduler file) and ``dask worker``s of one
    thread each, every one in a session of its own and stopped by its pid (:meth:`stop`).
    For trying the cluster path on one machine, the tests and the benchmark.

    The scheduler runs with ``worker-saturation`` 1.0: a job is sent to a worker only when it
    has a free thread (course_tools/README.md, "Grading on a cluster")."""

    def __init__(self, folder, env: dict | None = None, timeout: float = 30.0):
        import json
        import os
        import time
        from pathlib import Path

        self.folder = Path(folder)
        self.file = self.folder / "scheduler.json"
        self.env = env
        self.procs = []
        self.bin = str(Path(sys.executable).parent / "dask")
        sched_env = {**(env or os.environ),
                     "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"}
        self._spawn([self.bin, "scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--no-dashboard", "--scheduler-file", str(self.file)], "scheduler",
                    sched_env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.address = json.loads(self.file.read_text())["address"]
                return
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        self.stop()
        raise ClusterError("the Dask scheduler did not start: "
                           + (self.folder / "scheduler.log").read_text()[-500:])

    def _spawn(self, argv, name, env=None):
        import subprocess

        with open(self.folder / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.folder, env=env or self.env,
                                    start_new_session=True)
        self.procs.append(proc)
        return proc

    def start_worker(self, env: dict | None = None):
        """Start one worker (one thread, no nanny: a killed worker stays dead)."""
        n = len(self.procs)
        return self._spawn([self.bin, "worker", "--scheduler-file", str(self.file),
                            "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                            "127.0.0.1", "--name", f"w{n}"], f"worker{n}", env)

    def client(self):
        from distributed import Client
        return Client(self.address, timeout="30s", set_as_default=False)

    def wait_for_workers(self, n: int, timeout: float = 120) -> None:
        with self.client() as c:
            c.wait_for_workers(n, timeout=timeout)

    def stop(self) -> None:
        """Kill every process this cluster started (its session: nothing is left)."""
        import os
        import signal

        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
