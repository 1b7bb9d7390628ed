"""The pip and conda environments pin the same packages at the same versions."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert m, f"not an exact pin: {line!r}"
        pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def test_requirements_and_environment_yml_agree():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert _pins(pip_section) == req


def test_core_packages_pinned():
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    assert req["torch"] == "2.13.0"  # the CPU build this course is tested with
    for name in ("jupyterlab", "nbgrader", "numpy", "matplotlib", "transformers", "nbclient",
                 "nbformat", "tqdm", "pytest"):
        assert name in req, name


def test_installed_versions_match_pins():
    from importlib.metadata import version
    req = _pins((ROOT / "requirements.txt").read_text().splitlines())
    for name in ("torch", "nbgrader", "jupyterlab", "transformers", "numpy"):
        assert version(name).split("+")[0] == req[name], name
