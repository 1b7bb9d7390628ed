"""Grading on a real Dask cluster (course_tools.cluster): a ``dask scheduler`` and ``dask
worker`` processes started here on 127.0.0.1 (ports chosen at run time, each stopped by its
pid at the end, also when a test fails), driven by the grade command's ``--scheduler``.

* The CI class of lesson 1 (tests/grading_class.py, graded locally by the ``class_graded``
  fixture) graded through two workers gives the same grades.csv, byte for byte.
* A worker killed while it runs a job: the job is run again on another worker and graded; a
  job whose workers are killed twice is reported as such, and the class is complete.
* An unreachable scheduler: one line naming the address, exit status 2, nothing written.
* A worker with another course_lib refuses the job, and the refusal is reported.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

import wrong_answers
from conftest import CLASS_SETTINGS
from course_tools.cluster import LoopbackCluster
from course_tools.worker import JOBS_DIR_PREFIX

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def cluster(tmp_path):
    c = LoopbackCluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def _grade(subs: Path, out: Path, *extra: str, course: Path = REPO, timeout: float = 1500,
           env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                           str(out), "--course", str(course), *extra], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=env)


def test_the_class_graded_on_two_workers_matches_local_grading(class_graded, cluster, tmp_path):
    for _ in range(2):
        cluster.start_worker()
    cluster.wait_for_workers(2)
    out = tmp_path / "out"
    s = CLASS_SETTINGS
    run = _grade(class_graded.submissions, out, "--assignment", class_graded.case.name,
                 "--cell-timeout", str(s["cell_timeout"]), "--notebook-timeout",
                 str(s["notebook_timeout"]), "--scheduler", cluster.address)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    assert (out / "grades.csv").read_bytes() == (class_graded.out / "grades.csv").read_bytes()
    local = class_graded.out / "feedback"
    for f in sorted(local.rglob("*.md")):
        assert (out / "feedback" / f.relative_to(local)).read_text() == f.read_text(), f
    assert f"on the Dask cluster at {cluster.address}" in (out / "report.txt").read_text()


def _slow_class(mini_course: Path, subs: Path, students: list[str], seconds: int) -> None:
    release = nbformat.read(mini_course / "notebooks" / "mini" / "mini.ipynb", as_version=4)
    source = nbformat.read(mini_course / "solutions" / "mini" / "mini.ipynb", as_version=4)
    solution = wrong_answers.solution_submission(release, source)
    for student in students:
        nb = copy.deepcopy(solution)
        nb.cells.insert(1, nbformat.v4.new_code_cell(f"import time\ntime.sleep({seconds})"))
        path = subs / student / "mini" / "mini.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)


def _worker_pids(client) -> dict[str, int]:
    return client.run(os.getpid)


def test_a_dead_worker_costs_one_retry_and_a_job_that_kills_two_is_reported(
        mini_course, cluster, tmp_path):
    """Three workers; ``retried``'s worker is killed once (its job runs again elsewhere and
    is graded), ``doomed``'s twice (reported); a replacement worker starts after each kill."""
    for _ in range(3):
        cluster.start_worker()
    cluster.wait_for_workers(3)
    subs = tmp_path / "subs"
    _slow_class(mini_course, subs, ["doomed", "retried", "steady"], 12)
    out = tmp_path / "out"
    kills: dict[str, int] = {"retried": 1, "doomed": 2}
    done = threading.Event()
    killed: list[str] = []
    killed_pids: list[int] = []

    def executing(c) -> dict[str, list[str]]:
        """``{worker address: keys it is running now}`` (not merely queued there)."""
        return c.run(lambda dask_worker: [str(ts.key) for ts in dask_worker.state.executing])

    def killer():
        with cluster.client() as c:
            while not done.is_set() and any(kills.values()):
                for worker, keys in executing(c).items():
                    who = next((s for s in kills for k in keys if f"grade-{s}-" in k
                                and kills[s]), None)
                    if who is None:
                        continue
                    time.sleep(2)  # let the job get going, then make sure it still runs there
                    if not any(f"grade-{who}-" in k for k in executing(c).get(worker, [])):
                        continue
                    pid = _worker_pids(c)[worker]
                    os.kill(pid, signal.SIGKILL)
                    kills[who] -= 1
                    killed.append(who)
                    killed_pids.append(pid)
                    cluster.start_worker()
                    break
                time.sleep(0.2)
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        run = _grade(subs, out, "--scheduler", cluster.address, course=mini_course,
                     timeout=900)
    finally:
        done.set()
        t.join(30)
    assert sorted(killed) == ["doomed", "doomed", "retried"], (killed, run.stdout[-2000:])
    # a killed worker cannot remove its job's folder; the next job started anywhere on this
    # machine removes it (the job run again after each kill but the last)
    left = [p for pid in killed_pids[:-1]
            if (p := Path(tempfile.gettempdir()) / f"{JOBS_DIR_PREFIX}{pid}").exists()]
    assert left == [], left
    rows = {r["student"]: r for r in json.loads((out / "results.json").read_text())}
    assert set(rows) == {"doomed", "retried", "steady"}
    assert rows["retried"]["status"] == "graded" and rows["retried"]["score"] == \
        rows["retried"]["max_score"], rows["retried"]
    assert rows["steady"]["status"] == "graded", rows["steady"]
    assert rows["doomed"]["status"] == "autograde_error" and rows["doomed"]["score"] == 0
    assert "workers grading this notebook died 2 times while it ran" in rows["doomed"]["detail"]


def test_an_unreachable_scheduler_is_one_line_and_writes_nothing(mini_course, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the test runs: nobody listens there
    subs = tmp_path / "subs"
    _slow_class(mini_course, subs, ["ann"], 0)
    address = f"tcp://127.0.0.1:{port}"
    run = _grade(subs, tmp_path / "out", "--scheduler", address, course=mini_course,
                 timeout=120)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and address in lines[0] and "cannot reach" in lines[0], run.stderr
    assert not (tmp_path / "out").exists()


def test_a_worker_with_another_course_lib_refuses_and_is_reported(mini_course, tmp_path):
    alt = tmp_path / "alt"
    shutil.copytree(REPO / "course_lib", alt / "course_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(alt / "course_lib" / "units.py", "a") as f:
        f.write("\n# another version of the course\n")
    (tmp_path / "c").mkdir()
    cluster = LoopbackCluster(tmp_path / "c")
    try:
        cluster.start_worker(env={**os.environ, "PYTHONPATH": str(alt)})
        cluster.wait_for_workers(1)
        with cluster.client() as c:
            where = c.run(lambda: __import__("course_lib").__file__)
        assert all(str(alt) in f for f in where.values()), where
        subs = tmp_path / "subs"
        _slow_class(mini_course, subs, ["ann"], 0)
        run = _grade(subs, tmp_path / "out", "--scheduler", cluster.address,
                     course=mini_course, timeout=300)
    finally:
        cluster.stop()
    # the model answer is refused first, so nothing can be graded: said in one line
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-2000:]
    assert "another course_lib" in run.stderr and "install the same version" in run.stderr


def test_a_refused_student_job_is_a_row_not_a_loss():
    from course_tools.cluster import grade_remotely
    from course_tools.protocol import JobResult, JobSpec, Limits, Sandbox

    limits = Limits(cell_timeout=5, notebook_timeout=30.0, max_cell_output=100,
                    max_notebook_output=1000, memory=0, job_memory=0, processes=64,
                    scratch=2**26, file_size=2**20)
    spec = JobSpec(job_id="t-1", student="ann", assignment="mini", reference=False,
                   notebooks={}, files={}, source_files={}, gradebook="", config="",
                   limits=limits, sandbox=Sandbox.NONE, course_lib="not-this-one")
    result = JobResult.from_json(grade_remotely(spec.to_json()))
    assert result.job_id == "t-1" and not result.ok
    assert "another course_lib" in result.refused


@pytest.mark.parametrize("where", ["local", "cluster"])
def test_ctrl_c_keeps_what_was_graded_and_says_the_run_is_incomplete(where, mini_course,
                                                                     tmp_path):
    """SIGINT once two jobs are done (the model answer and one student): the jobs in flight
    are stopped, the rows graded so far are kept, the others say ``interrupted``, the report
    says INCOMPLETE, exit status 130, and no job's folder is left."""
    subs = tmp_path / "subs"
    _slow_class(mini_course, subs, ["a-first", "b-second", "c-third"], 8)
    out = tmp_path / "out"
    extra = []
    cluster = None
    if where == "cluster":
        (tmp_path / "c").mkdir()
        cluster = LoopbackCluster(tmp_path / "c")
        cluster.start_worker()
        cluster.wait_for_workers(1)
        extra = ["--scheduler", cluster.address]
    try:
        proc = subprocess.Popen([sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                                 str(out), "--course", str(mini_course), *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=REPO)
        lines = []
        for line in proc.stdout:  # the model answer, then a-first
            lines.append(line)
            if line.strip().startswith("[2/"):
                os.kill(proc.pid, signal.SIGINT)
                break
        rest, err = proc.communicate(timeout=300)
        _check_interrupted(proc, lines, rest, err, out)
    finally:
        if cluster is not None:
            cluster.stop()


def _check_interrupted(proc, lines, rest, err, out: Path) -> None:
    assert proc.returncode == 130, "".join(lines) + rest + err
    rows = {r["student"]: r for r in json.loads((out / "results.json").read_text())}
    finished = {s for s in rows for line in lines if f"] {s}/mini" in line}
    assert len(finished) == 1, lines  # the model answer and one student, in some order
    assert {s: r["status"] for s, r in rows.items()} == {
        s: "graded" if s in finished else "interrupted" for s in rows}
    assert "INCOMPLETE" in (out / "report.txt").read_text()
    for _ in range(100):  # a cluster's worker removes a stopped job's folder as it notices
        left = [*Path(tempfile.gettempdir()).glob(f"job-{proc.pid}-*"),
                *Path(tempfile.gettempdir()).glob(f"{JOBS_DIR_PREFIX}*/job-{proc.pid}-*")]
        if not left:
            break
        time.sleep(0.1)
    assert left == []


def test_a_dead_process_job_folders_are_removed_by_the_next_job(tmp_path):
    """What a process killed mid-job leaves (its jobs folder and a job's files) goes when any
    other process starts a job, also while the dead one is a zombie its parent has not reaped;
    a live process's folder stays."""
    from course_tools.worker import jobs_parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = tmp_path / f"{JOBS_DIR_PREFIX}{dead.pid}"
    (gone / "job-x-1" / "work").mkdir(parents=True)
    (gone / "job-x-1" / "work" / "lesson1.ipynb").write_text("{}")
    live = tmp_path / f"{JOBS_DIR_PREFIX}{os.getppid()}"
    (live / "job-y-1").mkdir(parents=True)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, never reaped (yet)
    for _ in range(100):
        if Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
            break
        time.sleep(0.05)
    killed = tmp_path / f"{JOBS_DIR_PREFIX}{zombie.pid}"
    (killed / "job-z-1").mkdir(parents=True)
    other = tmp_path / "course-jobs-notapid"
    other.mkdir()
    mine = jobs_parent(tmp_path)
    assert mine == tmp_path / f"{JOBS_DIR_PREFIX}{os.getpid()}" and mine.is_dir()
    assert not gone.exists() and not killed.exists()
    zombie.wait()
    assert (live / "job-y-1").is_dir() and other.is_dir()
    assert jobs_parent(tmp_path) == mine  # the next call: the same folder


def test_a_worker_whose_kernels_import_another_course_lib_refuses_the_job(monkeypatch):
    """A worker whose own course_lib matches the grade command's, but whose environment's kernels would import
    another (two checkouts sharing one environment on that machine), refuses each job in one line rather than
    failing every notebook: the same check the grade command makes before it starts (course_tools.integrity)."""
    from course_tools import integrity
    from course_tools.protocol import JobSpec, Limits, Sandbox
    from course_tools.worker import refusal

    limits = Limits(cell_timeout=5, notebook_timeout=30.0, max_cell_output=100, max_notebook_output=1000,
                    memory=0, job_memory=0, processes=64, scratch=2**26, file_size=2**20)
    spec = JobSpec(job_id="t-1", student="ann", assignment="mini", reference=False, notebooks={}, files={},
                   source_files={}, gradebook="", config="", limits=limits, sandbox=Sandbox.NONE,
                   course_lib=integrity.course_lib_fingerprint())
    assert refusal(spec) == ""
    monkeypatch.setattr(integrity, "kernels_course_lib", lambda sandboxed: Path("/elsewhere/course_lib"))
    why = refusal(spec)
    assert "kernels of this Python environment" in why and "import course_lib from /elsewhere" in why
