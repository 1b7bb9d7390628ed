"""Sealed answers (course_lib.checks.sealed) and check records (course_lib.checks.records):
every answer within tolerance passes, answers well outside fail, known mistakes are named, no
value is stored in plain; records compare the way the checks do."""
from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given, settings, strategies as st

from course_lib import checks
from course_lib.checks import CheckFailed, records, sealed
from course_tools import scoring, seal
from course_lib.checks import lesson1 as L1

REPO = Path(__file__).resolve().parents[1]


def test_canonical_forms():
    assert sealed.canonical(3.14159, 4) == "3.142e+00"
    assert sealed.canonical(-0.0, 3) == "0.00e+00" == sealed.canonical(0, 3)
    assert sealed.canonical(1024, None) == "1024" == sealed.canonical(1024.0, None)
    with pytest.raises(ValueError):
        sealed.canonical(1.5, None)
    with pytest.raises(ValueError):
        sealed.canonical(float("nan"), 3)


@settings(max_examples=60, deadline=None)
@given(value=st.floats(1e-6, 1e12), rel=st.sampled_from([0.001, 0.002, 0.005, 0.01, 0.05]),
       where=st.floats(-1, 1))
@example(value=0.94921875, rel=0.05, where=0.0)  # its top rounds up to 1.0: a coarser decade
@example(value=9.6e5, rel=0.05, where=1.0)
def test_every_answer_within_tolerance_passes(value, rel, where):
    with mock.patch.object(sealed, "ITERATIONS", 1):  # the tolerance logic, not the hash cost
        s = seal.seal_number("x", value, salt="test/x", rel=rel)
        x = value * (1 + where * rel * (1 - 1e-9))
        assert sealed.judge(s, x).ok, (value, rel, x)
        # and at most half as much again outside: 1.6 * rel away fails
        assert not sealed.judge(s, value * (1 + 1.6 * rel)).ok
        assert not sealed.judge(s, value * (1 - 1.6 * rel)).ok


def test_mistakes_are_named_and_never_the_right_answer():
    s = seal.seal_number("share", 0.25, salt="test/share", rel=0.01, mistakes={
        "give a fraction, not a percentage": 25, "within tolerance, dropped": 0.2501})
    assert [m for m, _ in s.mistakes] == ["give a fraction, not a percentage"]
    assert sealed.judge(s, 25.1).mistake == "give a fraction, not a percentage"
    v = sealed.judge(s, 0.5)
    assert not v.ok and v.mistake is None and "share is not right" in v.message
    assert "too large by a factor of about 12" in sealed.judge(s, 3.0).message
    # without its size bin (a seal made before them) only the power of ten speaks
    from dataclasses import replace
    assert "too large by less than a factor of 100" in sealed.judge(replace(s, size=None), 3.0).message
    assert "its sign is wrong" in sealed.judge(s, -0.25).message
    assert sealed.judge(s, 0.2501).ok


def test_exact_whole_numbers_and_choices():
    s = seal.seal_number("n", 1024, salt="test/n", rel=0, mistakes={"off by one": 1023})
    assert sealed.judge(s, 1024).ok and sealed.judge(s, 1024.0).ok
    assert sealed.judge(s, 1023).mistake == "off by one"
    assert "whole number" in sealed.judge(s, 1024.5).message
    with pytest.raises(ValueError):
        seal.seal_number("n", 1.5, salt="test/n", rel=0)
    c = seal.seal_choice("part", "Feed_Forward", salt="test/part",
                           choices=("attention", "feed-forward"), hints={"attention": "count"})
    assert sealed.judge(c, " feed forward ").ok
    assert sealed.judge(c, "attention").message == "part: 'attention' is not right: count"
    # the answer is echoed as written, not in its canonical form
    assert sealed.judge(c, " Attention").message == "part: ' Attention' is not right: count"
    assert "answer with one of" in sealed.judge(c, "mlp").message


@pytest.mark.parametrize("written", ["Feed forward", " feed_forward ", "FEED  FORWARD", "feed__forward", "feed-forward"])
def test_every_check_reads_a_choice_the_one_way(written, monkeypatch, capsys):
    """A choice is read one way everywhere (sealed.normalize_choice): a sealed question, an option read by
    read_choice, and check_choice (which records the option itself, so the grader compares options)."""
    from course_lib.checks.exercise import read_choice

    options = ("attention", "feed forward")
    c = seal.seal_choice("part", "feed forward", salt="test/part", choices=options)
    assert sealed.judge(c, written).ok
    assert read_choice(written, "part", options) == "feed forward"
    monkeypatch.setenv(records.ENV, "1")
    checks.check_choice(written, "feed forward", what="part", choices=options)
    assert json.loads(capsys.readouterr().out.split(" ", 1)[1])["got"] == "feed forward"
    with pytest.raises(CheckFailed, match="answer with one of 'attention', 'feed forward'"):
        read_choice("feed", "part", options)
    with pytest.raises(CheckFailed, match="answer with one of"):
        checks.check_choice("feedforward", "feed forward", what="part", choices=options)


def test_a_sealed_answer_holds_no_value_and_round_trips(tmp_path, monkeypatch):
    """The seal command writes the entry into its assignment's JSON file (replacing one of the
    same salt, keeping the others); the file holds no form of the value, and load() reads back
    the same Sealed the library makes."""
    s = seal.seal_number("x", 123.456, salt="test/x", rel=0.001,
                           mistakes={"doubled": 246.912})
    (tmp_path / "test.json").write_text(json.dumps({"test/y": {"stale": 1}}))
    monkeypatch.setattr(sealed, "SEALED_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=r"test\.json: sealed answer 'test/y' is malformed"):
        sealed.load("test")
    (tmp_path / "test.json").write_text(json.dumps({"test/y": json.loads(json.dumps(
        dataclasses.asdict(seal.seal_choice("y", "a", salt="test/y", choices="ab"))))}))
    sealed.load.cache_clear()
    done = subprocess.run([sys.executable, "-c", "import sys; from course_lib.checks import "
                           f"sealed; sealed.SEALED_DIR = {str(tmp_path)!r}; from course_tools import seal; "
                           "sys.exit(seal.main(sys.argv[1:]))", "number", "123.456",
                           "--rel", "0.001", "--what", "x", "--salt", "test/x",
                           "--mistake", "doubled=246.912"], capture_output=True, text=True,
                          check=True, cwd=REPO)
    assert done.stderr == "" and "SEALED['test/x']" in done.stdout, done.stdout
    text = (tmp_path / "test.json").read_text()
    assert not re.search(r"12[34]\.|24[67]\.|1\.23|2\.47", text), text
    loaded = sealed.load("test")
    assert list(loaded) == ["test/y", "test/x"] and loaded["test/x"] == s
    assert sealed.judge(loaded["test/x"], 123.5).ok
    assert sealed.judge(loaded["test/x"], 246.9).mistake == "doubled"
    sealed.load.cache_clear()


def test_every_assignments_sealed_answers_load():
    """Each assignment's file loads, every entry keyed by its own salt, and its checks module
    holds every entry (a module-level name, or inside a dict, tuple or declared check): no
    stale seals."""
    import dataclasses
    import importlib

    def held(x, depth=0):
        if isinstance(x, sealed.Sealed):
            yield x.salt
        elif depth < 3 and isinstance(x, (dict, tuple, list)):
            for v in (x.values() if isinstance(x, dict) else x):
                yield from held(v, depth + 1)
        elif depth < 3 and dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                yield from held(getattr(x, f.name), depth + 1)

    for path in sorted(Path(sealed.SEALED_DIR).glob("*.json")):
        entries = sealed.load(path.stem)
        module = importlib.import_module(f"course_lib.checks.{path.stem}")
        used = {salt for v in vars(module).values() for salt in held(v)}
        unused = sorted(set(entries) - used)
        assert entries and not unused, (path.name, unused)


def test_lesson1_test_yourself_values_are_not_in_course_lib():
    """The right answers (written here from the GPT-2 architecture, not read from course_lib)
    pass, and no usual spelling of them appears in course_lib's source."""
    d, L, V, n = 768, 12, 50257, 1024
    total = (V + n) * d + L * (12 * d * d + 13 * d) + 2 * d
    params_m, emb_pct = total / 1e6, 100 * (V + n) * d / total
    L1.check_tys1(params_m, emb_pct)
    L1.check_tys1(round(params_m, 1), round(emb_pct, 1))
    text = "\n".join(p.read_text() for p in (REPO / "course_lib").rglob("*.py"))
    for v in (params_m, emb_pct):
        for form in {f"{v:.1f}", f"{v:.2f}", f"{v:.4g}", f"{v:.5g}"}:  # 3 figures: too common
            assert not re.search(rf"(?<![\d.]){re.escape(form)}(?!\d)", text), form
    assert str(total) not in text and f"{total:,}" not in text and f"{total:_}" not in text


def test_check_sealed_messages_name_the_mistake():
    with pytest.raises(CheckFailed, match="tied head a second time"):
        L1.check_tys1(163.0, 31.6)
    with pytest.raises(CheckFailed, match="four d_model"):
        L1.check_tys2("attention", 2 / 3)


# --- records ---------------------------------------------------------------------------------

def test_records_are_published_only_under_grading(capsys, monkeypatch):
    monkeypatch.delenv(records.ENV, raising=False)
    checks.check_value(3, 3, what="x")
    assert capsys.readouterr().out == ""
    monkeypatch.setenv(records.ENV, "1")
    checks.check_value(3, 3, what="x")
    with pytest.raises(CheckFailed):
        checks.check_choice("b", "a", what="pick", choices=("a", "b"))
    lines = capsys.readouterr().out.splitlines()
    got = [json.loads(ln.split(" ", 1)[1]) for ln in lines]
    assert got == [{"check": "value", "what": "x", "got": 3, "rel": 0.0, "integer": False},
                   {"check": "choice", "what": "pick", "got": "b"}]


def _rec(check, what, got, **kw):
    return {"check": check, "what": what, "got": got, **kw}


def test_records_compare_as_the_checks_do():
    ref = _rec("value", "n", 100, rel=0.0, integer=True)
    assert scoring.same_record(_rec("value", "n", 100.0), ref)
    assert not scoring.same_record(_rec("value", "n", 101), ref)
    assert not scoring.same_record(_rec("value", "m", 100), ref)  # another check
    share = _rec("value", "s", 0.5, rel=0.01, integer=False)
    assert scoring.same_record(_rec("value", "s", 0.504), share)
    assert not scoring.same_record(_rec("value", "s", 0.51), share)
    assert not scoring.same_record(_rec("value", "s", "0.5"), share)
    assert not scoring.same_record(_rec("value", "s", True), share)
    assert scoring.same_record(_rec("choice", "c", "a"), _rec("choice", "c", "a"))
    four = seal.seal_number("t", 4, salt="test/t", rel=0.01)
    from dataclasses import asdict
    sref = json.loads(json.dumps(_rec("sealed", "t", 4, seal=asdict(four))))
    assert scoring.same_record(_rec("sealed", "t", 4.01), sref)
    assert not scoring.same_record(_rec("sealed", "t", 2), sref)
    close = _rec("close", "a", {"shape": [2], "values": [1.0, 2.0]}, rtol=1e-3, atol=0.0)
    assert scoring.same_record(_rec("close", "a", {"shape": [2], "values": [1.0005, 2.0]}), close)
    assert not scoring.same_record(_rec("close", "a", {"shape": [1, 2], "values": [1.0, 2.0]}), close)
    ok, why = scoring.same_records([_rec("value", "n", 100)], [ref, ref])
    assert not ok and why == "check 'n' reported no result"  # no counts: hidden checks
    assert scoring.same_records([], []) == (True, "")
    # paired by label: a learner's dict walked in its own key order still matches ...
    other = _rec("value", "m", 7, rel=0.0, integer=True)
    assert scoring.same_records([_rec("value", "m", 7), _rec("value", "n", 100)],
                                [ref, other]) == (True, "")
    # ... but an extra result, or a missing one, does not
    assert not scoring.same_records([_rec("value", "n", 100), _rec("value", "x", 1)], [ref])[0]
    assert not scoring.same_records([_rec("value", "m", 7)], [ref, other])[0]


def test_check_close(monkeypatch, capsys):
    np = pytest.importorskip("numpy")
    checks.check_close(np.array([1.0, 2.0]), [1.0, 2.0 + 1e-9], what="v")
    for got, expected in ((np.zeros((2, 2)), np.zeros(4)), ([1.0, 5.0], [1.0, 2.0]), ([1.0, np.nan], [1.0, np.nan])):
        with pytest.raises(CheckFailed) as e:  # another shape, a value off, NaN: no shape or value said
            checks.check_close(got, expected, what="v")
        assert str(e.value) == "v is not right"
    with pytest.raises(CheckFailed, match="v: expected a tensor, got dict"):
        checks.check_close({"a": 1}, [1.0], what="v")
    monkeypatch.setenv(records.ENV, "1")
    checks.check_close(np.arange(10_000.0), np.arange(10_000.0), what="big")
    rec = json.loads(capsys.readouterr().out.split(" ", 1)[1])
    assert rec["got"]["shape"] == [10_000] and len(rec["got"]["values"]) <= records.MAX_VALUES
    assert math.isclose(rec["rtol"], 1e-5)


def test_a_sealed_zero_says_no_power_of_ten():
    """An answer sealed as 0 (no request fits) has no power of ten: a negative answer is told its
    sign is wrong, another one the hint, never 'less than 10 times off'."""
    z = seal.seal_number("requests", 0, salt="test/zero", rel=0, hint="the weights come first")
    assert sealed.judge(z, 0).ok
    assert sealed.judge(z, -3).message == "requests is not right: its sign is wrong."
    assert sealed.judge(z, 5).message == "requests is not right: the weights come first."
