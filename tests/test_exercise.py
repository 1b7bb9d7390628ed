"""The declared exercise (course_lib.checks.exercise) on its own, with a toy exercise: arguments built from a case
(``make``) and an array part compared by ``compare``."""
from __future__ import annotations

import json

import pytest
import torch

from course_lib.checks import CheckFailed, records
from course_lib.checks.exercise import Exercise, Inputs, Part

SHOWN = dict(n=3, seed=0)
HIDDEN_CASE = dict(n=7, seed=5)


def _x(n, seed):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


CHECK = Exercise(
    "doubled", Inputs([SHOWN], hidden="a longer vector"), make=lambda c: {"x": _x(**c)},
    reference=lambda r: {"value": 2 * r["x"]},
    parts=[Part(close=(1e-6, 1e-8), tensor=True, shape_words="the shape of x",
                mistakes=lambda r: {"it adds x to itself once too often": 3 * r["x"]})])


def _records(capsys) -> list[dict]:
    return [json.loads(line.split(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()
            if line.startswith("COURSE-CHECK-RECORD ")]


def test_made_arguments_reach_fn_and_a_right_array_publishes_one_close_record(capsys, monkeypatch):
    monkeypatch.setenv(records.ENV, "1")
    CHECK(lambda x: x + x)
    CHECK(lambda x: x * 2, [HIDDEN_CASE])
    shown, hidden = _records(capsys)
    assert shown["check"] == "close" and shown["what"] == "doubled(n=3, seed=0)"
    assert shown["got"]["values"] == pytest.approx((2 * _x(**SHOWN)).tolist())
    assert (shown["rtol"], shown["atol"]) == (2e-6, 2e-8)  # twice the comparison's tolerance
    assert hidden["what"] == "doubled on a hidden test's input (a longer vector)"
    exact = Exercise("doubled", CHECK.inputs, CHECK.reference, [Part(close=(0, 0), record=(0, 0))], make=CHECK.make)
    exact(lambda x: x + x)
    (record,) = _records(capsys)
    assert (record["rtol"], record["atol"]) == (0, 0)  # the record's tolerance as given


def test_an_array_part_names_its_mistake_and_hides_a_hidden_shape(capsys, monkeypatch):
    monkeypatch.setenv(records.ENV, "1")
    with pytest.raises(CheckFailed, match="it adds x to itself once too often"):
        CHECK(lambda x: 3 * x)
    with pytest.raises(CheckFailed, match=r"expected shape \(3,\) \(the shape of x\), got \(4,\)"):
        CHECK(lambda x: torch.zeros(4))
    with pytest.raises(CheckFailed) as e:
        CHECK(lambda x: torch.zeros(x.shape[0] + 1), [HIDDEN_CASE])
    assert str(e.value) == "doubled on a hidden test's input (a longer vector): expected the shape of x, got a " \
        "different one" and "7" not in str(e.value) and "8" not in str(e.value)
    with pytest.raises(CheckFailed, match="expected a torch tensor, got list"):
        CHECK(lambda x: (2 * x).tolist())
    assert _records(capsys) == []  # a wrong array publishes nothing


def test_a_value_part_still_goes_through_check_value():
    check = Exercise("total", Inputs([SHOWN]), make=lambda c: {"x": _x(**c)},
                     reference=lambda r: {"value": r["n"] * 2}, parts=[Part(integer=True, mistakes=lambda r: {
                         "that is n, not 2·n": r["n"]})])
    check(lambda x: 2 * len(x))
    with pytest.raises(CheckFailed, match=r"total\(n=3, seed=0\) is not right: that is n, not 2·n"):
        check(lambda x: len(x))


def test_an_answer_that_changes_its_input_in_place_does_not_move_the_reference():
    def doubled_in_place(x):
        return x.mul_(2)  # right, though it changes x

    def tripled_in_place(x):
        return x.mul_(3)  # the named mistake: compared with 3·x of the original x, not of the changed one
    CHECK(doubled_in_place)
    with pytest.raises(CheckFailed, match="it adds x to itself once too often"):
        CHECK(tripled_in_place)
