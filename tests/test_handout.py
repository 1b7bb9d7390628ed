"""``make handout``: what a class gets holds what students need and nothing of the answers."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools import handout

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("handout") / "class"
    handout.write_handout(out, REPO)
    return out


def test_the_handout_holds_what_students_need_and_no_answers(written):
    assert sorted(p.name for p in written.iterdir()) == sorted(
        [*handout.FILES, *handout.FOLDERS, "Makefile", "README.md", ".gitignore"])
    for gone in ("solutions", "tests", "course_tools", "scripts", "benchmarks",
                 "nbgrader_config.py"):
        assert not (written / gone).exists(), gone
    release = sorted(p.relative_to(REPO / "notebooks") for p in (REPO / "notebooks").rglob("*.ipynb"))
    given = sorted(p.relative_to(written / "notebooks") for p in (written / "notebooks").rglob("*.ipynb"))
    assert given == release
    for rel in release:  # the student release itself (tests/test_release.py: no answers in it)
        assert (written / "notebooks" / rel).read_bytes() == (REPO / "notebooks" / rel).read_bytes()
    assert handout.marked_files(written) == []
    assert not list(written.rglob("__pycache__"))
    assert "make lab" in (written / "README.md").read_text()


def test_make_lab_and_course_lib_work_from_the_handout(written):
    dry = subprocess.run(["make", "-n", "lab"], cwd=written, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "pip install --quiet -r requirements.txt" in dry.stdout
    assert "jupyter lab" in dry.stdout and "my-work" in dry.stdout
    code = ("import course_lib, course_lib.checks.lesson1 as L1; print(course_lib.__file__); "
            "print(course_lib.load_card('gpt2').d_model)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", code], cwd=written, capture_output=True,
                         text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    where, d_model = run.stdout.split()
    assert Path(where).resolve().is_relative_to(written.resolve()) and d_model == "768"


def test_the_handout_refuses_a_used_folder_a_stale_release_and_a_marker(tmp_path, monkeypatch):
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(handout.HandoutError, match="not an empty folder"):
        handout.write_handout(used, REPO)
    assert (used / "keep.txt").read_text() == "mine"

    monkeypatch.setattr(handout, "stale_notebooks", lambda course: ["lesson3"])
    with pytest.raises(handout.HandoutError, match="lesson3: run `make release`"):
        handout.write_handout(tmp_path / "stale", REPO)
    assert not (tmp_path / "stale").exists()

    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "x.py").write_text("# ### BEGIN HIDDEN TESTS\n")
    assert handout.marked_files(tmp_path / "planted") == ["x.py"]


def test_the_command_says_what_went_wrong_in_one_line(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    r = subprocess.run([sys.executable, "-m", "course_tools.handout", str(tmp_path / "full")],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
