"""The size words of a wrong number are true: swept over ratios from 1.01 to 10⁶, both ways,
through check_value (every value check of every lesson ends in it) and a sealed answer's
check (every test-yourself number), the words' claim is read back and compared with the ratio
itself."""
from __future__ import annotations

import math
import re

import pytest

from course_lib.checks import CheckFailed, about, check_sealed, check_value, size_words
from course_lib.checks import sealed
from course_tools import seal

RATIOS = sorted({round(10 ** (k / 40), 6) for k in range(1, 241)} | {1.01, 1.05, 1.2, 2, 4.25,
                                                                      32768, 10 ** 6})
"""1.0593 ... 10⁶ on a log grid of 40 steps a decade, and the issue's cases."""


def claim_holds(message: str, ratio: float) -> bool:
    """Is what ``message`` says about got / expected (= ``ratio``) true?"""
    side = "too large" if ratio > 1 else "too small"
    if side not in message:
        return False
    r = ratio if ratio > 1 else 1 / ratio
    if m := re.search(r"by a factor of about (\d[\d,]*(?:\.\d+)?)", message):
        k = float(m.group(1).replace(",", ""))
        return k / 1.16 <= r <= k * 1.16
    if m := re.search(r"by about (\d+)%", message):
        off = abs(ratio - 1) * 100
        return abs(off - int(m.group(1))) <= 0.5 + 1e-9
    off = abs(ratio - 1)  # a percentage is of the right answer, both ways
    if m := re.search(r"by less than (\d+)%", message):
        return off < int(m.group(1)) / 100
    if m := re.search(r"by between (\d+)% and (\d+)%", message):
        return int(m.group(1)) / 100 <= off <= int(m.group(2)) / 100
    if "by less than a factor of 100" in message:
        return 1 < r < 100
    if m := re.search(r"by a factor between ([\d,]+(?:\.\d+)?) and ([\d,]+(?:\.\d+)?)", message):
        lo, hi = (float(g.replace(",", "")) for g in m.groups())
        return lo <= r <= hi
    return False


@pytest.mark.parametrize("expected", [123_456_789, 0.3772, 8.75])
@pytest.mark.parametrize("direction", ["larger", "smaller"])
def test_check_value_words_are_true(expected, direction):
    wrong = []
    for ratio in RATIOS:
        ratio = ratio if direction == "larger" else 1 / ratio
        with pytest.raises(CheckFailed) as e:
            check_value(expected * ratio, expected, what="x", rel=1e-3)
        if not claim_holds(str(e.value), ratio):
            wrong.append(f"{ratio:.5g}: {e.value}")
    assert not wrong, "\n".join(wrong[:20])


def test_the_issues_cases():
    assert size_words(104.3, 104.3 / 1.2) == "it is too large by a factor of about 1.2"
    assert size_words(68, 16) == "it is too large by a factor of about 4"
    assert size_words(16, 68) == "it is too small by a factor of about 4"
    assert size_words(32768, 1) == "it is too large by a factor of about 30,000"
    assert size_words(1.03, 1) == "it is too large by about 3%"
    assert about(2.0) == "by a factor of about 2" and about(1.13) == "by a factor of about 1.1"


@pytest.mark.parametrize("sized", [True, False])
@pytest.mark.parametrize("value,rel", [(87.0, 0.01), (16, 0), (0.455, 0.005), (104.3 / 1.2, 0.005)])
def test_sealed_words_are_true(value, rel, sized):
    """A sealed answer knows only its power of ten and its size bin: its words claim no more
    than they prove, wherever in the bin the ratio lies (and, with the bin unknown, the power
    of ten)."""
    from dataclasses import replace

    s = seal.seal_number("q", value, salt="test/q", rel=rel)
    s = s if sized else replace(s, size=None)
    wrong = []
    for ratio in RATIOS[::4] + [1.2, 2, 4.25, 1.03]:  # each check hashes (0.05 s): a coarser grid
        for r in (ratio, 1 / ratio):
            got = value * r
            got = round(got) if rel == 0 else got
            if got == value or got == 0 or (rel and abs(got - value) <= 1.5 * rel * value):
                continue
            with pytest.raises(CheckFailed) as e:
                check_sealed(got, s)
            msg = str(e.value)
            if "less than 10 times off" in msg:
                ok = max(got / value, value / got) < 10
            elif m := re.search(r"less than (\d+)% off", msg):
                ok = abs(got / value - 1) < int(m.group(1)) / 100
            else:
                ok = claim_holds(msg, got / value)
            if not ok:
                wrong.append(f"{got!r} for {value}: {msg}")
    assert not wrong, "\n".join(wrong[:20])


def test_zero_and_sign_are_named():
    assert size_words(0, 5) == "you returned 0"
    assert size_words(-5, 5) == "its sign is wrong"
    assert size_words(5, 0) == "it should be zero"
    assert not math.isnan(float(re.search(r"[\d.]+", about(7.7)).group()))
