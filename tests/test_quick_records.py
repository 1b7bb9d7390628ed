"""scripts/quick_records.py, the refactorer's quick look at the check records: it finds a changed
record and a changed message, and writes new messages (only) when asked."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAVED = REPO / "tests" / "data" / "check_records" / "lesson1.json"


def _run(saved: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "quick_records.py"), "lesson1", "--only",
                           "solution", "--jobs", "1", "--saved", str(saved), *flags],
                          capture_output=True, text=True, timeout=600)


def test_it_finds_a_changed_record_and_message_then_writes_messages_only(tmp_path):
    original = json.loads(SAVED.read_text())
    tampered = json.loads(SAVED.read_text())
    tampered["solution"]["t-gpt2-params"]["records"][0]["got"] *= 2
    tampered["solution"]["t-doubling"]["error"] = "AssertionError: not what the check says"
    path = tmp_path / "lesson1.json"
    path.write_text(json.dumps(tampered))

    run = _run(path, "--write-messages")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "solution[t-gpt2-params].records[0].got" in run.stdout
    assert "solution[t-doubling].error" in run.stdout
    assert "1 differences in records, 1 in messages" in run.stdout
    assert json.loads(path.read_text()) == tampered  # a record differs: nothing written

    del tampered["solution"]["t-gpt2-params"]
    tampered["solution"]["t-gpt2-params"] = original["solution"]["t-gpt2-params"]
    path.write_text(json.dumps(tampered))
    run = _run(path, "--write-messages")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 differences in records, 1 in messages" in run.stdout
    written = json.loads(path.read_text())
    assert written["solution"] == original["solution"]
    assert written["wrong"] == original["wrong"]
