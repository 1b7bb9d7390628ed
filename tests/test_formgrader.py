"""nbgrader's formgrader on a grading run (course_tools.formgrader), through its HTTP API
rather than a browser: it starts with a PATH that lacks the virtualenv (the set-up where it
used to hang on "Loading" with "No such file or directory: 'alembic'"), lists the graded
students with their scores, takes a score override, and the export writes it into the CSV
and says so."""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

from course_tools.formgrader import export, serve_command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(port, token, path, data=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/formgrader/api/{path}",
                                 data=None if data is None else json.dumps(data).encode(),
                                 method="GET" if data is None else "PUT",
                                 headers={"Authorization": f"token {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read().decode())


def test_formgrader_lists_scores_and_an_override_reaches_the_csv(mini_graded, tmp_path,
                                                                 monkeypatch):
    out = tmp_path / "grading"
    shutil.copytree(mini_graded.out, out)
    port, token = _free_port(), "course-tools-test"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no virtualenv on PATH: the launcher adds it
    cmd, env = serve_command(out, port, open_browser=False,
                             extra=[f"--IdentityProvider.token={token}"])
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(cmd, env=env, cwd=out / "course", stdout=log, stderr=log,
                            start_new_session=True)
    try:
        subs = None
        for _ in range(120):
            try:
                subs = _api(port, token, "submissions/mini")
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.5)
        assert subs is not None, (tmp_path / "server.log").read_text()[-3000:]
        results = mini_graded.results
        graded = {s: r["score"] for s, r in results.items() if r["status"] in ("graded", "blank",
                                                                               "timeout")}
        listed = {s["student"]: s["score"] for s in subs}
        assert {s: listed[s] for s in graded} == graded
        nbs = {n["student"]: n["id"] for n in _api(port, token, "submitted_notebooks/mini/mini")}
        grades = {g["name"]: g for g in _api(port, token, f"grades?submission_id={nbs['wrong-2']}")}
        assert grades["t-double"]["auto_score"] == 0
        _api(port, token, f"grade/{grades['t-double']['id']}", {"manual_score": 1.5})
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    lines = []
    assert export(out, echo=lines.append) == [
        f"wrong-2/mini: {results['wrong-2']['score']:g} -> {results['wrong-2']['score'] + 1.5:g}"]
    with open(out / "grades.csv", newline="") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert float(rows["wrong-2"]["score"]) == results["wrong-2"]["score"] + 1.5
    assert "score changed by the instructor (t-double 0 -> 1.5)" in rows["wrong-2"]["detail"]
    assert rows["solution"]["score"] == f"{results['solution']['score']:g}"
    assert any("wrong-2/mini" in ln for ln in lines)
    assert export(out, echo=lambda *a: None) != []  # idempotent: the gradebook still says so
