"""The grading sandbox (course_tools.sandbox), attacked for real.

A hostile class of lesson 1 is graded by the README's grade command with its defaults (a
subprocess: ``python -m course_tools.grade SUBMISSIONS --out OUT``, plus ``--jobs 2``), one
student per attack, beside an honest classmate.  Every attack is code a learner could submit
that would succeed without the sandbox (the grader runs as this user, often root): rewrite
``grades.csv`` after the grade command exits, kill the grader, read a classmate's notebook and
the model answers, write to /tmp, the home folder and course_lib, leave processes behind,
reach a TCP port on the host's 127.0.0.1, flood the process table, use more memory than a job
may by forking, fill the disk, trace or find the grader's processes, follow symbolic links in
the submission, close the kernel's sockets, make a namespace to escape.  After the command
exits the test waits for "after the fact" attacks, then checks: 0 points for every attacker,
no file outside the sandbox, no survivor, ``grades.csv`` unchanged, the honest classmate graded
in full.  Also: ``--sandbox none`` says so everywhere, and the command refuses with one line
(exit 2, nothing written) where bwrap is missing.
"""
from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

import wrong_answers
from course_tools import sandbox
from course_tools.protocol import (JobResult, JobSpec, Limits, ProtocolError, Sandbox,
                                   SandboxFacts, Status)

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "lesson1"
AFTER_THE_FACT = 8
"""Seconds the late attacks wait before acting; the test waits longer after the grader exits."""

# Each attack is the body of a code cell inserted after the notebook's first cell.  Names in
# braces are filled in: OUT, SUBS, REPO, HOME, PORT, TAG (unique to this run: marker files
# and the argv of processes left behind carry it).
ATTACKS = {
    "late-writer": r'''
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep({AFTER})
        try:
            rows = open("{OUT}/grades.csv").read().replace("late-writer,lesson1,0,", "late-writer,lesson1,17,")
            open("{OUT}/grades.csv", "w").write(rows)
        except OSError as e:
            pass
        for p in ("/tmp/sbx-{TAG}-late", "{HOME}/sbx-{TAG}-late"):
            try: open(p, "w").write("pwned")
            except OSError: pass
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{TAG}"])
    os._exit(0)
''',
    "killer": r'''
import os, signal
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid != os.getpid():
        try: os.kill(pid, signal.SIGKILL)
        except OSError: pass
for target in (os.getppid(), -1):
    try: os.kill(target, signal.SIGKILL)
    except OSError: pass
try: os.killpg(os.getpgid(0), signal.SIGTERM)
except OSError: pass
''',
    "reader": r'''
import os
for p in ("{SUBS}/honest/lesson1/lesson1.ipynb", "{REPO}/solutions/lesson1/lesson1.ipynb",
          "{OUT}/course/gradebook.db", "{REPO}/tests/conftest.py", "{HOME}/.bashrc"):
    try:
        print("LEAKED", p, open(p, errors="replace").read()[:3000])
    except OSError as e:
        print("refused", p, type(e).__name__)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:  # the grader's environment?
    try: print("environ of", pid, open(f"/proc/{pid}/environ", errors="replace").read())
    except OSError as e: print("refused environ", pid, type(e).__name__)
for root in ("{SUBS}", "{OUT}", "{REPO}"):
    print("listing", root, os.path.exists(root))
''',
    "writer": r'''
import os, subprocess, sys
for p in ("/tmp/sbx-{TAG}-writer", "{HOME}/sbx-{TAG}-writer", "{REPO}/course_lib/sbx_{TAG}.py",
          "{SUBS}/sbx-{TAG}-writer", "{OUT}/sbx-{TAG}-writer"):
    try: open(p, "w").write("pwned"); print("wrote (the test looks on the host)", p)
    except OSError as e: print("refused", p, type(e).__name__)
import course_lib
try: open(os.path.join(os.path.dirname(course_lib.__file__), "units.py"), "a").write("\nBROKEN = 1\n"); print("WROTE course_lib")
except OSError as e: print("refused course_lib", type(e).__name__)
for i in range(200):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{TAG}"], start_new_session=True)
''',
    "network": r'''
import signal
import socket
for host in ("127.0.0.1", "::1", "{HOST_IP}"):
    try:
        s = socket.create_connection((host, {PORT}), timeout=3); s.sendall(b"{TAG}"); print("CONNECTED", host)
    except OSError as e:
        print("refused", host, type(e).__name__)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"{TAG}", ("127.0.0.1", {PORT})); print("sent udp")
except OSError as e:
    print("refused udp", type(e).__name__)
''',
    "fork-flood": r'''
import os, time
n = 0
try:
    for i in range(100000):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork refused after", n, e)
''',
    "memory-forks": r'''
import os, time
import numpy as np
kids = []
for i in range(8):  # each child stays well under the per-process cap, together they do not
    pid = os.fork()
    if pid == 0:
        try:
            chunks = [np.ones(2**27 // 8) for _ in range(7)]  # 0.875 GiB, touched 128 MiB at a time
            time.sleep(30)
        finally:
            os._exit(0)
    kids.append(pid)
time.sleep(15)
''',
    "filler": r'''
import os
for folder in ("/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~")):
    try:  # many files: one may not pass the grader's cap on a file's size
        for n in range(1000):
            with open(os.path.join(folder, f"fill-{TAG}-{n}"), "wb") as f:
                for i in range(64):
                    f.write(b"x" * 2**20)
    except OSError as e:
        print("stopped in", folder, e.errno)
''',
    "tracer": r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = []
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if b"course_tools" in cmd or b"nbgrader" in cmd or b"pytest" in cmd:
        found.append(pid)
    if pid != os.getpid() and libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print("TRACED-GRADER" if pid in found else "traced a sandbox process", pid)
print("FOUND-GRADER" if found else "grader not visible", found)
''',
    "symlinker": r'''
import os
for name in os.listdir("."):
    print("here:", name)
for name in ("passwd-link", "honest-link", "out-link"):
    try: print("LEAKED", name, open(name).read()[:200])
    except OSError as e: print("refused", name, type(e).__name__)
''',
    "socket-closer": r'''
import os
os.closerange(3, 65536)
''',
    "escaper": r'''
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x00020000, 0x40000000
for flag in (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET):
    if libc.unshare(flag) == 0:
        print("ESCAPED unshare", hex(flag))
for cmd in (["unshare", "-r", "true"], ["mount", "-t", "tmpfs", "x", "/tmp/work"], ["chroot", "/", "true"]):
    try:
        if subprocess.run(cmd, capture_output=True, timeout=5).returncode == 0:
            print("ESCAPED", cmd[0])
    except OSError:
        pass
''',
}
LEAK_WORDS = ("LEAKED", "WROTE course_lib", "CONNECTED", "TRACED-GRADER", "FOUND-GRADER",
              "ESCAPED")
"""Words an attack prints when it succeeded (never allowed in its graded notebook)."""


def _attack_notebook(release, code: str):
    nb = copy.deepcopy(release)
    nb.cells.insert(1, nbformat.v4.new_code_cell(code))
    return nb


def _host_ip() -> str:
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("10.255.255.255", 1))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class _Listener:
    """A TCP and UDP port on the host's 127.0.0.1 that records whoever reaches it."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("0.0.0.0", 0))
        self.port = self.tcp.getsockname()[1]
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.udp.settimeout(0.2)
        self.seen: list[str] = []
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            for sock in (self.tcp, self.udp):
                try:
                    if sock is self.tcp:
                        conn, addr = sock.accept()
                        self.seen.append(f"tcp {addr}")
                        conn.close()
                    else:
                        _, addr = sock.recvfrom(100)
                        self.seen.append(f"udp {addr}")
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.tcp.close()
        self.udp.close()


def _tagged_processes(tag: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if tag.encode() in (p / "cmdline").read_bytes():
                    found.append(int(p.name))
            except OSError:
                pass
    return found


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The hostile class graded once; what the checks below read."""
    tag = f"sbx{uuid.uuid4().hex[:10]}"
    base = tmp_path_factory.mktemp("hostile")
    subs, out = base / "submissions", base / "grading"
    release = nbformat.read(REPO / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    source = nbformat.read(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    honest = wrong_answers.solution_submission(release, source)
    secret = f"honest-secret-{tag}"
    honest.cells[1].source += f"\n# {secret}\n"
    listener = _Listener()
    values = {"OUT": out, "SUBS": subs, "REPO": REPO, "HOME": Path.home(), "PORT": listener.port,
              "TAG": tag, "AFTER": AFTER_THE_FACT, "HOST_IP": _host_ip()}
    notebooks = {"honest": honest}
    for name, code in ATTACKS.items():
        for k, v in values.items():
            code = code.replace("{" + k + "}", str(v))
        notebooks[name] = _attack_notebook(release, code)
    for name, nb in notebooks.items():
        path = subs / name / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    link_dir = subs / "symlinker" / ASSIGNMENT
    os.symlink("/etc/passwd", link_dir / "passwd-link")
    os.symlink(subs / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", link_dir / "honest-link")
    os.symlink(out, link_dir / "out-link")
    lib_before = {str(p): _sha(p) for p in (REPO / "course_lib").rglob("*.py")}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                                 str(out), "--jobs", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, "GRADER_SECRET": f"grader-secret-{tag}"})
        try:
            stdout, stderr = proc.communicate(timeout=1500)
        finally:
            proc.kill()
        run = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        csv_sha = _sha(out / "grades.csv") if (out / "grades.csv").is_file() else None
        time.sleep(AFTER_THE_FACT + 6)  # the late attacks act now, if they still can
        survivors = _tagged_processes(tag)
        markers = [str(p) for folder in ("/tmp", Path.home(), subs, out, REPO / "course_lib")
                   for p in Path(folder).glob(f"*{tag}*")]
        yield {"run": run, "out": out, "subs": subs, "tag": tag, "secret": secret,
               "csv_sha_at_exit": csv_sha, "survivors": survivors, "markers": markers,
               "network": list(listener.seen), "lib_before": lib_before,
               "cgroups": sandbox.leftover_cgroups(f"course-grade-{proc.pid}-")}
    finally:
        listener.close()
        for pid in _tagged_processes(tag):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def _rows(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def test_the_grade_command_survives_the_class_and_writes_every_row(hostile):
    run = hostile["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = _rows(hostile["out"])
    assert set(rows) == {"honest", *ATTACKS}
    assert "verified:" in run.stdout and "WARNING" not in run.stdout, run.stdout[-2000:]
    assert "sandbox: bubblewrap" in (hostile["out"] / "report.txt").read_text()


def test_the_honest_classmate_is_graded_in_full(hostile):
    row = _rows(hostile["out"])["honest"]
    assert (row["status"], row["score"], row["max_score"]) == ("graded", "17", "17"), row


def test_no_attack_earns_a_point(hostile):
    rows = _rows(hostile["out"])
    assert {s: rows[s]["score"] for s in ATTACKS} == {s: "0" for s in ATTACKS}


def test_grades_csv_is_unchanged_after_the_command_exits(hostile):
    assert hostile["csv_sha_at_exit"] is not None
    assert _sha(hostile["out"] / "grades.csv") == hostile["csv_sha_at_exit"]


def test_nothing_outside_the_sandbox_was_touched(hostile):
    assert hostile["markers"] == []
    after = {str(p): _sha(p) for p in (REPO / "course_lib").rglob("*.py")}
    assert after == hostile["lib_before"]
    assert hostile["network"] == [], "a kernel reached the host's port"


def test_no_process_outlives_its_job(hostile):
    assert hostile["survivors"] == []
    assert hostile["cgroups"] == []


def test_no_attack_saw_what_it_must_not(hostile):
    """The graded notebooks and feedback hold what each attack printed: none may say it
    succeeded, and nobody's holds the honest classmate's notebook."""
    out = hostile["out"]
    for student in ATTACKS:
        graded = out / "course" / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        text = json.dumps([c.get("outputs", []) for c in
                           nbformat.read(graded, as_version=4).cells]) if graded.is_file() else ""
        text += (out / "feedback" / student / f"{ASSIGNMENT}.md").read_text()
        assert not [w for w in LEAK_WORDS if w in text], (student, text[-3000:])
        assert hostile["secret"] not in text, student
        assert f"grader-secret-{hostile['tag']}" not in text, student  # the grader's environment


def test_a_limit_the_sandbox_enforced_is_named(hostile):
    rows = _rows(hostile["out"])
    assert "processes" in rows["fork-flood"]["detail"], rows["fork-flood"]
    assert rows["memory-forks"]["status"] in ("blank", "memory_limit")
    assert "memory" in rows["memory-forks"]["detail"], rows["memory-forks"]
    assert "scratch space" in rows["filler"]["detail"], rows["filler"]
    assert rows["socket-closer"]["status"] in ("timeout", "kernel_died"), rows["socket-closer"]


# --- without a sandbox, and where there is none ---------------------------------------------

def _mini_subs(tmp_path, mini_course) -> Path:
    release = nbformat.read(mini_course / "notebooks" / "mini" / "mini.ipynb", as_version=4)
    path = tmp_path / "subs" / "ann" / "mini" / "mini.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(release, path)
    return tmp_path / "subs"


def test_sandbox_none_says_so_in_the_report_and_every_row(tmp_path, mini_course):
    subs = _mini_subs(tmp_path, mini_course)
    run = subprocess.run([sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                          str(tmp_path / "out"), "--course", str(mini_course), "--sandbox",
                          "none"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "sandbox: none" in (tmp_path / "out" / "report.txt").read_text()
    row = _rows(tmp_path / "out")["ann"]
    assert "graded without a sandbox (--sandbox none)" in row["detail"], row


def test_without_bwrap_the_command_refuses_in_one_line_and_writes_nothing(tmp_path, mini_course):
    subs = _mini_subs(tmp_path, mini_course)
    env = {**os.environ, sandbox.BWRAP_ENV: str(tmp_path / "no-such-bwrap")}
    run = subprocess.run([sys.executable, "-m", "course_tools.grade", str(subs), "--out",
                          str(tmp_path / "out"), "--course", str(mini_course)],
                         capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "apt-get install bubblewrap" in lines[0], run.stderr
    assert not (tmp_path / "out").exists()


# --- the job boundary ----------------------------------------------------------------------

LIMITS = Limits(cell_timeout=60, notebook_timeout=600.0, max_cell_output=1000,
                max_notebook_output=10000, memory=2**32, job_memory=2**32 + 2**30,
                processes=512, scratch=2**30, file_size=2**28)


def _spec(**over) -> JobSpec:
    d = dict(job_id="r-000001", student="ann", assignment="mini", reference=False,
             notebooks={"mini": {"cells": []}}, files={"data.csv": "MSwy"}, source_files={},
             gradebook="", config="", limits=LIMITS, sandbox=Sandbox.BWRAP, course_lib="x")
    d.update(over)
    return JobSpec(**d)


def test_a_job_spec_and_result_travel_as_json_and_back():
    spec = _spec()
    again = JobSpec.from_json(spec.to_json())
    assert again == spec and again.sandbox is Sandbox.BWRAP
    assert JobSpec.decode(again.files) == {"data.csv": b"1,2"}
    res = JobResult(job_id="r-000001", ok=True, events=[{"event": "end"}],
                    sandbox=SandboxFacts(kind="bwrap", oom_kills=1))
    assert JobResult.from_json(res.to_json()) == res


@pytest.mark.parametrize("change, field", [
    ({"files": {"../x": "AA=="}}, "bad file entry"),
    ({"files": {"/etc/x": "AA=="}}, "bad file entry"),
    ({"sandbox": "docker"}, "unknown sandbox"),
    ({"reference": "yes"}, "'reference'"),
    ({"limits": {"cell_timeout": 1}}, "limits"),
])
def test_a_malformed_job_spec_is_refused_naming_the_field(change, field):
    d = json.loads(_spec().to_json())
    d.update(change)
    with pytest.raises(ProtocolError, match=field):
        JobSpec.from_json(json.dumps(d))


def test_a_malformed_job_result_is_refused():
    d = json.loads(JobResult(job_id="x").to_json())
    d["events"] = ["not an object"]
    with pytest.raises(ProtocolError, match="event"):
        JobResult.from_json(json.dumps(d))


def test_statuses_are_defined_once():
    from course_tools import feedback, grade, intake
    assert set(grade.STATUSES) == set(Status)
    assert set(feedback.STATUS_WORDS) == {str(s) for s in Status}
    assert intake.USABLE is Status.GRADED


def _in_group(group: sandbox.JobCgroup, code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code])
    for d in group.dirs:
        (d / "cgroup.procs").write_text(str(proc.pid))
    return proc


def test_a_job_cgroup_counts_only_the_processes_that_do_not_exit():
    """``JobCgroup.destroy`` gives the processes inside a grace period: one that exits within it
    (a kernel still shutting down on a loaded machine) is not counted as left running; one that
    stays is killed and counted."""
    group = sandbox.JobCgroup.create(f"course-grace-test-{uuid.uuid4().hex[:8]}", 64, 0)
    assert group.kind, "this machine could not make a job cgroup (the sandbox needs one)"
    exiting = _in_group(group, "import time; time.sleep(0.5)")
    staying = _in_group(group, "import time; time.sleep(60)")
    reaper = threading.Thread(target=exiting.wait)  # its parent reaps it, as jupyter_client does
    reaper.start()
    try:
        assert group.destroy(grace=2.0) == 1
        reaper.join(5)
        assert exiting.returncode == 0
        assert staying.wait(5) == -signal.SIGKILL
        assert not any(d.exists() for d in group.dirs)
    finally:
        for proc in (exiting, staying):
            proc.kill()
