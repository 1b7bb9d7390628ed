"""nbgrader's formgrader on a grading run (course_tools.formgrader), in a real browser
(headless Chromium from Debian, driven by selenium; ``make test`` installs chromium and
chromium-driver): it starts with a PATH that lacks the virtualenv (the set-up where it used to
hang on "Loading" with "No such file or directory: 'alembic'"), its page lists the graded
students with their scores, a score typed into its grading page reaches the gradebook, and
the export writes it into the CSV and says so."""
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

from selenium.webdriver.common.keys import Keys

from course_tools.formgrader import export, serve_command


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or
                                            "/usr/bin/chromedriver"), options=options)


def _wait(page, ok, what: str, seconds: float = 60):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            got = ok()
        except Exception:  # the page is still being built
            got = None
        if got:
            return page.find_element("tag name", "body").text
        time.sleep(0.5)
    raise AssertionError(f"{what} did not appear: {page.find_element('tag name', 'body').text[:500]}")


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
        graded = {s: r["score"] for s, r in results.items() if r["status"] in (
            "graded", "blank", "timeout", "kernel_died")}
        listed = {s["student"]: s["score"] for s in subs}
        assert {s: listed[s] for s in graded} == graded
        page = _browser()
        try:
            base = f"http://127.0.0.1:{port}"
            page.get(f"{base}/formgrader?token={token}")  # the login cookie, for the whole site
            page.get(f"{base}/formgrader/manage_submissions/mini")
            body = lambda: " ".join(page.find_element("tag name", "body").text.split())
            table = _wait(page, lambda: all(f" {s} " in body() for s in graded),
                          "the students' list")
            for student, score in graded.items():
                row = next(ln for ln in table.splitlines() if f" {student} " in f" {ln} ")
                assert f"{score:g} / 6" in row, (student, row)
            nbs = {n["student"]: n["id"] for n in _api(port, token,
                                                       "submitted_notebooks/mini/mini")}
            page.get(f"{base}/formgrader/submissions/{nbs['wrong-2']}/?index=0")
            _wait(page, lambda: page.find_elements("id", "t-double"), "the grading page")
            grades = {}
            for attempt in range(120):
                if attempt % 20 == 0:  # the page saves a score when the field is left; on a busy machine
                    box = page.find_element("id", "t-double")  # its handlers may bind after the field shows:
                    box.clear()                                  # enter it again every 10 s until it is saved
                    box.send_keys("1.5", Keys.TAB)
                grades = {g["name"]: g for g in _api(
                    port, token, f"grades?submission_id={nbs['wrong-2']}")}
                if grades["t-double"]["manual_score"] is not None:
                    break
                time.sleep(0.5)
            assert grades["t-double"]["manual_score"] == 1.5 and grades["t-double"]["auto_score"] == 0
        finally:
            page.quit()
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
