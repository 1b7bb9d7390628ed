"""The README's lab command serves the course in JupyterLab (with nbgrader's extensions)."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


def test_make_lab_serves_the_course(tmp_path):
    """`make lab` copies the release into my-work/ (never overwriting) and serves lesson 1 there."""
    port, token = _free_port(), "course-test-token"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path), "BROWSER": "true"}
    args = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token={token}"
    proc = subprocess.Popen(["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                status, _ = _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.time() < deadline, "JupyterLab did not start within 90 s"
                time.sleep(0.5)
        assert status == 200
        status, page = _get(f"{base}/lab?token={token}")
        assert status == 200 and "JupyterLab" in page
        status, body = _get(f"{base}/api/contents/my-work?token={token}")
        listed = {item["name"] for item in json.loads(body)["content"]}
        assert "lesson1" in listed
        status, body = _get(f"{base}/api/contents/my-work/lesson1/lesson1.ipynb?token={token}")
        nb = json.loads(body)["content"]
        assert nb["cells"], "lesson 1 opened empty"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
