"""Unit tests of course_lib.checks.lesson5: a right answer passes, each named mistake gets its
message, a hard-coded or counter-calling answer fails, and no message shows the hidden value.

The right answers here are written from the definitions (a key and a value per kv head per
token per layer; a multiply-add is 2 FLOPs; GiB = 2^30 bytes; an accelerator's memory is its
data sheet's GB, 10^9 bytes), not from course_lib, so they
also cross-check the counters the checks compare against.  The cases graded in the notebook
are read from its test cells, so every graded case is exercised here too."""
from __future__ import annotations

import builtins
import math
import re
from pathlib import Path

import nbformat
import pytest
import torch

import course_lib as cl
from course_lib.checks import lesson5 as L5
from notebook_cells import fails, graded_cells
from scans import shows_none_of

NOTEBOOK = Path(__file__).resolve().parents[1] / "solutions" / "lesson5" / "lesson5.ipynb"
GiB = 2**30
GB = 10**9


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


# --- right answers, from the definitions ---------------------------------------------------------

@torch.no_grad()
def gen_right(model, prompt, n_new):
    tokens, out = prompt, model.run(prompt)
    for _ in range(n_new):
        new = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, new], 1)
        out = model.run(new, out.kvs)  # one call more than needed: allowed
    return tokens


def kv_right(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number):
    return 2 * n_layers * n_kv_heads * d_head * n_tokens * bytes_per_number


def intensity_right(n_tokens, bytes_per_number):
    return 2 * n_tokens / bytes_per_number


def ridge_right(peak_flops, bandwidth, bytes_per_number):
    ridge = peak_flops / bandwidth
    return ridge, ridge * bytes_per_number / 2


def requests_right(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
                   bytes_per_number):
    free = memory_gb * GB - n_params * bytes_per_number
    cache = kv_right(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number)
    return max(0, math.floor(free / cache))


# --- the notebook's graded cases ------------------------------------------------------------------

class _Names(dict):
    """Locals for exec: the learner's names (answers, functions) read as None; builtins are
    looked up as usual."""
    def __missing__(self, key):
        if hasattr(builtins, key):
            raise KeyError(key)
        return None


def notebook_cases(check: str) -> list:
    """Every case the notebook's test cells (visible and hidden) pass to ``lesson5.<check>``."""
    found = []

    class Recorder:
        def __getattr__(self, name):
            def call(fn, cases=None):
                if name == check:
                    found.extend(cases if cases is not None else {
                        "check_generate_cached": L5.GEN_CASES, "check_kv_cache_size": L5.KV_CASES,
                        "check_flops_per_weight_byte": L5.INTENSITY_CASES,
                        "check_ridge_point": L5.RIDGE_CASES,
                        "check_requests_fit": L5.REQUEST_CASES}[name])
            return call

    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and f"lesson5.{check}(" in cell.source:
            exec(cell.source, {}, _Names(lesson5=Recorder()))
    assert found, check
    return found


# --- right answers pass on every graded case --------------------------------------------------

def test_right_answers_pass_on_every_graded_case(capsys):
    L5.check_generate_cached(gen_right, cases=notebook_cases("check_generate_cached"))
    L5.check_kv_cache_size(kv_right, cases=notebook_cases("check_kv_cache_size"))
    L5.check_flops_per_weight_byte(intensity_right,
                                   cases=notebook_cases("check_flops_per_weight_byte"))
    L5.check_ridge_point(ridge_right, cases=notebook_cases("check_ridge_point"))
    L5.check_requests_fit(requests_right, cases=notebook_cases("check_requests_fit"))
    L5.check_tys1("keys and values", 4.0)
    L5.check_tys1(" Keys and Values ", 4)
    L5.check_tys2(1, 512, "memory", "compute")
    s = cl.llama_shape()  # course_lib's exact counts for the 7B shape pass too
    L5.check_tys2(cl.arithmetic_intensity(s, 1, "bf16"), cl.arithmetic_intensity(s, 512, "bf16"),
                  "Memory", "compute")
    L5.check_recap(16, "memory")
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # a check writes nothing (stderr costs the cell)


def test_the_module_figures():
    assert kv_right(**L5.SEVEN_B, n_tokens=8192, bytes_per_number=2) == 4 * GiB  # 4.0 GiB
    ridge, batch = ridge_right(312e12, 2.039e12, 2)
    assert round(ridge) == round(batch) == 153
    assert intensity_right(1, 2) == 1 and intensity_right(512, 2) == 512
    a = L5.ACCELERATORS
    assert (a["A100 SXM 80GB"].bandwidth, a["A100 SXM 80GB"].peak_bf16) == (2.039e12, 312e12)
    assert (a["H100 SXM 80GB"].bandwidth, a["H100 SXM 80GB"].peak_bf16) == (3.35e12, 989e12)
    assert (a["H200 SXM"].bandwidth, a["H200 SXM"].peak_bf16) == (4.8e12, 989e12)


def test_recap_service_fits_far_fewer_than_the_ridge_batch():
    """The recap's point: the batch that fits (16) is far below the A100's ridge batch."""
    r = {k: v for k, v in L5.RECAP.items() if k != "accelerator"}
    fits = L5.requests_expected(**r)
    assert fits == requests_right(**L5.request_args(**r)) == 16
    acc = L5.ACCELERATORS[L5.RECAP["accelerator"]]
    assert fits < ridge_right(acc.peak_bf16, acc.bandwidth, 2)[1] / 5


def test_graded_request_counts_are_not_on_a_knife_edge():
    """A learner's float arithmetic rounds down the same way as course_lib's integers: no
    graded quotient lies within 1% of a whole number; one case does not fit at all."""
    cases = notebook_cases("check_requests_fit") + [
        {k: v for k, v in L5.RECAP.items() if k != "accelerator"}]
    zero = 0
    for case in cases:
        a = L5.request_args(**case)
        q = ((a["memory_gb"] * GB - a["n_params"] * a["bytes_per_number"])
             / kv_right(a["n_layers"], a["n_heads"], a["n_kv_heads"], a["d_head"],
                        a["n_tokens"], a["bytes_per_number"]))
        zero += q < 0
        assert q < 0 or 0.01 < q % 1 < 0.99, (case, q)
    assert zero >= 1


def test_graded_cases_tell_kv_heads_from_query_heads():
    assert any(c["n_kv_heads"] < c["n_heads"] for c in L5.KV_CASES)
    assert any(L5.request_args(**c)["n_kv_heads"] < L5.request_args(**c)["n_heads"]
               for c in notebook_cases("check_requests_fit"))


# --- exercise 1: generation ------------------------------------------------------------------

def _loop(step_input, cache, pick=lambda logits: logits[:, -1], extra=0):
    """A generation loop with one knob per mistake."""
    @torch.no_grad()
    def fn(model, prompt, n_new):
        tokens, out = prompt, model.run(prompt)
        first = out
        for _ in range(n_new + extra):
            new = pick(out.logits).argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, new], 1)
            x = tokens if step_input == "all" else new
            out = model.run(x, {"latest": out.kvs, "first": first.kvs, None: None}[cache])
        return tokens
    return fn


@pytest.mark.parametrize("fn, phrase", [
    (_loop("all", None), "generation without a cache"),
    (_loop("all", "latest"), "tokens at a step after the prompt"),  # the model refuses it: the step is named
    (_loop("new", "first"), "stale cache"),
    (_loop("new", "latest", pick=lambda logits: logits[:, 0]), "argmax of the logits at the last"),
    (_loop("new", "latest", extra=1), "off-by-one"),
    (_loop("new", "latest", extra=-1), "off-by-one"),
    (lambda model, prompt, n: model.generate(prompt, n), "calls model.generate"),
    (lambda model, prompt, n: gen_right(model, prompt, n)[:, prompt.shape[1]:], "only the new tokens"),
    (lambda model, prompt, n: gen_right(model, prompt, n).tolist(), "return a tensor"),
], ids=["uncached", "whole-sequence-cached", "stale", "first-position", "one-more", "one-less", "generate", "new-only",
        "list"])
def test_generation_mistake_is_named(fn, phrase):
    assert phrase in fails(L5.check_generate_cached, fn,
                           cases=notebook_cases("check_generate_cached"))


def test_uncached_loop_fails_though_its_tokens_are_right():
    """Calling the model on the whole sequence (model(tokens)) each step gives the right tokens
    but is not a cache: the recorded calls say so."""
    @torch.no_grad()
    def fn(model, prompt, n_new):
        tokens = prompt
        for _ in range(n_new):
            tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], 1)
        return tokens

    case = L5.GEN_CASES[0]
    model = L5.toy_model(case["shape"], case["seed"])
    prompt = L5._prompt(model, case["batch"], case["prompt_len"], case["seed"])
    assert torch.equal(fn(model, prompt, case["n_new"]),
                       model.generate(prompt, case["n_new"], use_cache=False))
    assert "without a cache" in fails(L5.check_generate_cached, fn)


def test_a_cached_loop_that_feeds_the_last_prompt_token_as_a_step_passes():
    """Hugging Face style: the prompt minus its last token first, then one token at a time."""
    @torch.no_grad()
    def fn(model, prompt, n_new):
        out = model.run(prompt[:, :-1])
        tokens, new = prompt, prompt[:, -1:]
        for _ in range(n_new):
            out = model.run(new, out.kvs)
            new = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, new], 1)
        return tokens

    L5.check_generate_cached(fn, cases=[c for c in notebook_cases("check_generate_cached")
                                        if c["prompt_len"] > 1])


def test_stale_cache_really_changes_the_tokens():
    """Without the 'stale' diagnosis (calls recorded) the tokens still differ on every graded
    case: the toy models' weights are wide enough for a stale cache to show."""
    stale = _loop("new", "first")
    for case in notebook_cases("check_generate_cached"):
        model = L5.toy_model(case["shape"], case["seed"])
        prompt = L5._prompt(model, case["batch"], case["prompt_len"], case["seed"])
        expected = model.generate(prompt, case["n_new"], use_cache=False)
        assert not torch.equal(stale(model, prompt, case["n_new"]), expected)
        assert len(set(expected[:, case["prompt_len"]:].flatten().tolist())) > 2


# --- exercise 2: cache size --------------------------------------------------------------------

def _kv(change):
    return lambda **a: change(kv_right(**a), a)


@pytest.mark.parametrize("fn, phrase", [
    (_kv(lambda kv, a: kv / 2), "a factor 2 is missing"),
    (_kv(lambda kv, a: kv * a["n_heads"] / a["n_kv_heads"]), "query heads (n_heads)"),
    (_kv(lambda kv, a: 8 * kv), "bits"),
    (_kv(lambda kv, a: kv / a["bytes_per_number"]), "count of numbers"),
    (_kv(lambda kv, a: kv / a["n_layers"]), "multiply by n_layers"),
    (_kv(lambda kv, a: kv / a["n_tokens"]), "one token's cache"),
    (_kv(lambda kv, a: kv / GiB), "in GiB"),
    (_kv(lambda kv, a: kv / 1e9), "in GB"),
], ids=["K-not-V", "query-heads", "bits", "numbers", "one-layer", "one-token", "GiB", "GB"])
def test_kv_mistake_is_named(fn, phrase):
    msg = fails(L5.check_kv_cache_size, fn, cases=notebook_cases("check_kv_cache_size"))
    assert phrase in msg
    shows_none_of(msg, *(kv_right(**c) for c in L5.KV_CASES))


def test_kv_hard_coded_and_counter_calls_fail():
    seven_b = kv_right(**L5.KV_CASES[0])
    msg = fails(L5.check_kv_cache_size, lambda **a: seven_b)
    assert "n_kv_heads=8" in msg  # the visible GQA case already catches it

    def lazy(n_layers, n_heads, n_kv_heads, d_head, n_tokens, bytes_per_number):
        s = L5.cache_shape(n_layers, n_heads, n_kv_heads, d_head)
        return cl.kv_cache_bytes_per_sequence(s, n_tokens, "bf16")

    assert "course_lib's own counter" in fails(L5.check_kv_cache_size, lazy)


# --- exercise 3: FLOPs per weight byte ------------------------------------------------------------

@pytest.mark.parametrize("fn, phrase", [
    (lambda n_tokens, bytes_per_number: n_tokens / bytes_per_number, "multiply-adds"),
    (lambda n_tokens, bytes_per_number: 2 * n_tokens / (8 * bytes_per_number), "bits"),
    (lambda n_tokens, bytes_per_number: 2 / bytes_per_number, "grow with n_tokens"),
    (lambda n_tokens, bytes_per_number: bytes_per_number / (2 * n_tokens), "bytes per FLOP"),
    (lambda n_tokens, bytes_per_number: 2 * n_tokens * bytes_per_number, "divide by it"),
], ids=["MACs", "bits", "no-reuse", "inverted", "times-bytes"])
def test_intensity_mistake_is_named(fn, phrase):
    cases = notebook_cases("check_flops_per_weight_byte")
    msg = fails(L5.check_flops_per_weight_byte, fn, cases=cases)
    assert phrase in msg


def test_intensity_that_ignores_bytes_fails_the_visible_random_case_and_the_hidden():
    def fn(n_tokens, bytes_per_number):
        return float(n_tokens)  # right only at 2 bytes a number
    L5.check_flops_per_weight_byte(fn, cases=L5.INTENSITY_CASES[:2])  # the fixed cases cannot tell
    assert fails(L5.check_flops_per_weight_byte, fn).startswith(L5.RANDOM_TAG)
    fails(L5.check_flops_per_weight_byte, fn, cases=notebook_cases("check_flops_per_weight_byte"))


def test_a_hard_coded_cache_size_fails_the_visible_random_case():
    right = L5.kv_cache_expected(**L5.KV_CASES[0])
    L5.check_kv_cache_size(lambda **case: right, cases=L5.KV_CASES[:1])
    fixed = {str(c): L5.kv_cache_expected(**c) for c in L5.KV_CASES[:2]}  # right on the fixed cases only
    msg = fails(L5.check_kv_cache_size, lambda **case: fixed.get(str(case), right))
    assert msg.startswith(L5.RANDOM_TAG + "kv_cache_size("), msg
    assert L5._random_kv_case() == L5.RANDOM_KV_CASE  # the same on every run


# --- exercise 4: ridge point ---------------------------------------------------------------------

def _ridge(ridge=None, batch=None):
    def fn(peak_flops, bandwidth, bytes_per_number):
        r, b = ridge_right(peak_flops, bandwidth, bytes_per_number)
        args = dict(P=peak_flops, W=bandwidth, b=bytes_per_number, r=r)
        return (ridge(**args) if ridge else r), (batch(**args) if batch else b)
    return fn


@pytest.mark.parametrize("fn, phrase", [
    (_ridge(ridge=lambda P, W, **_: W / P), "bandwidth ÷ peak"),
    (_ridge(ridge=lambda P, W, **_: P / (W * 2**40 / 1e12)), "TiB/s"),
    (_ridge(ridge=lambda P, W, **_: P / 2 / W), "halves the peak"),
    (_ridge(batch=lambda r, b, **_: r * b), "multiply-adds as FLOPs"),
    (_ridge(batch=lambda r, b, **_: r * 8 * b / 2), "bits"),
    (_ridge(batch=lambda r, b, **_: r * 2 / b), "solve 2·B"),
    (_ridge(ridge=lambda P, W, **_: round(P / W)), "that is rounded"),  # the newcomer trial's finding
], ids=["inverted", "TiB", "MACs-ridge", "MACs-batch", "bits", "upside-down", "rounded"])
def test_ridge_mistake_is_named(fn, phrase):
    msg = fails(L5.check_ridge_point, fn, cases=notebook_cases("check_ridge_point"))
    assert phrase in msg
    shows_none_of(msg, *ridge_right(312e12, 2.039e12, 2))


def test_ridge_batch_equal_to_ridge_fails_the_visible_test_at_run_time():
    """Right at 2 bytes a number (the A100 case): the visible case made at run time catches it."""
    fn = _ridge(batch=lambda r, **_: r)
    L5.check_ridge_point(fn, cases=L5.RIDGE_CASES[:1])
    msg = fails(L5.check_ridge_point, fn)
    assert msg.startswith(L5.RANDOM_TAG + "ridge_point(") and "the ridge itself" in msg
    assert "the ridge itself" in fails(L5.check_ridge_point, fn,
                                       cases=notebook_cases("check_ridge_point"))


def test_ridge_wants_two_numbers():
    assert "return 2 numbers" in fails(L5.check_ridge_point, lambda **a: 153.0)


def test_a_wrong_intensity_inside_the_batch_is_pointed_at():
    """A batch built on a flops_per_weight_byte that is off by an unnamed factor gets a
    pointer back to that exercise."""
    msg = fails(L5.check_ridge_point, _ridge(batch=lambda r, b, **_: r * b / 3))
    assert "your flops_per_weight_byte" in msg


# --- exercise 5: requests that fit ---------------------------------------------------------------

def _req(change):
    def fn(**a):
        b = a["bytes_per_number"]
        mem, w = a["memory_gb"] * GB, a["n_params"] * b
        c = kv_right(a["n_layers"], a["n_heads"], a["n_kv_heads"], a["d_head"], a["n_tokens"], b)
        return change(mem, w, c, a)
    return fn


def _floor(mem, w, c):
    return max(0, math.floor((mem - w) / c))


@pytest.mark.parametrize("fn, phrase", [
    (_req(lambda mem, w, c, a: math.floor(mem / c)), "the weights must fit too"),
    (_req(lambda mem, w, c, a: _floor(a["memory_gb"] * GiB, w, c)), "not GiB"),
    (_req(lambda mem, w, c, a: _floor(mem, w, c * a["n_heads"] / a["n_kv_heads"])), "not the query heads"),
    (_req(lambda mem, w, c, a: _floor(mem, w, c / 2)), "factor 2"),
    (_req(lambda mem, w, c, a: max(0, math.ceil((mem - w) / c))), "round down"),
    (_req(lambda mem, w, c, a: _floor(mem, a["n_params"], c)), "n_params × bytes_per_number"),
    (_req(lambda mem, w, c, a: math.floor((mem - w) / c)), "negative"),
], ids=["no-weights", "GiB", "query-heads", "K-not-V", "ceil", "params-as-bytes", "negative"])
def test_request_mistake_is_named(fn, phrase):
    msg = fails(L5.check_requests_fit, fn, cases=notebook_cases("check_requests_fit"))
    assert phrase in msg
    # 0 (the weights alone do not fit) is the rule the exercise states, which the "negative" words repeat
    shows_none_of(msg, 30, *(L5.requests_expected(**c) for c in L5.REQUEST_CASES), at_least=2)


def test_requests_hard_coded_and_counter_calls_fail():
    # the first visible case's answer, hard-coded: the next visible case catches it, and the one made at run time
    assert fails(L5.check_requests_fit, lambda **a: 30).startswith("requests_fit(memory_gb=24, ")
    assert fails(L5.check_requests_fit, lambda **a: 30, cases=L5.REQUEST_CASES[-1:]).startswith(L5.RANDOM_TAG)
    fails(L5.check_requests_fit, lambda **a: 30, cases=notebook_cases("check_requests_fit"))

    def lazy(memory_gb, n_params, n_layers, n_heads, n_kv_heads, d_head, n_tokens,
             bytes_per_number):
        s = L5.cache_shape(n_layers, n_heads, n_kv_heads, d_head)
        free = memory_gb * GB - n_params * bytes_per_number
        return int(free // cl.kv_cache_bytes_per_sequence(s, n_tokens, "bf16"))

    assert "course_lib's own counter" in fails(L5.check_requests_fit, lazy)


@pytest.mark.parametrize("fn, phrase", [
    (_req(lambda mem, w, c, a: math.floor((mem - w) / c)), "negative"),
    (_req(lambda mem, w, c, a: _floor(mem, 2 * a["n_params"], c)), "weights are counted at 2 bytes"),
    (_req(lambda mem, w, c, a: _floor(mem, w, c * 2 / a["bytes_per_number"])), "cache is counted at 2 bytes"),
], ids=["negative", "weights-16-bit", "cache-16-bit"])
def test_the_visible_test_holds_the_rules_the_exercise_states(fn, phrase):
    """0 when the weights alone do not fit, weights and cache both at bytes_per_number: a learner working alone
    never sees the hidden tests, so the visible one fails such an answer (the newcomer trial's finding)."""
    assert phrase in fails(L5.check_requests_fit, fn)


def test_requests_want_a_whole_number():
    assert "whole number" in fails(L5.check_requests_fit,
                                   _req(lambda mem, w, c, a: (mem - w) / c))
    L5.check_requests_fit(_req(lambda mem, w, c, a: float(_floor(mem, w, c))))


def test_request_args_refuse_a_sliding_window():
    with pytest.raises(ValueError, match="sliding window"):
        L5.request_args("Mistral-7B-v0.1", 80, 8192, 2)


# --- test yourself and recap ---------------------------------------------------------------------

@pytest.mark.parametrize("answer, phrase", [
    (("keys", 4.0), "values are kept too"),
    (("queries, keys and values", 4.0), "query is used once"),
    (("attention weights", 4.0), "weights change"),
    (("logits", 4.0), "answer with one of"),
    (("keys and values", 4 * GiB / 1e9), "in GB"),
    (("keys and values", 2.0), "factor 2"),
    (("keys and values", 8.0), "not 4"),
    (("keys and values", 32.0), "bits"),
    (("keys and values", 4 * GiB), "in bytes"),
    (("keys and values", 3.0), "your kv_cache_size"),
])
def test_tys1_mistakes(answer, phrase):
    assert phrase in fails(L5.check_tys1, *answer)


@pytest.mark.parametrize("answer, phrase", [
    ((0.5, 256, "memory", "compute"), "multiply-adds"),
    ((1 / 8, 64, "memory", "compute"), "bits"),
    ((1, 1, "memory", "compute"), "serves all 512"),
    ((1, 512, "compute", "memory"), "waits on memory"),
    ((1, 512, "memory", "memory"), "beyond the A100's ridge"),
    ((1, 512, "bandwidth", "compute"), "answer with one of"),
])
def test_tys2_mistakes(answer, phrase):
    assert phrase in fails(L5.check_tys2, *answer)


def test_tys_round_and_exact_figures_pass():
    """The sealed answers keep their tolerance: the lesson's round figures and course_lib's exact
    counts for Llama 2 7B (within 3 %) both pass, and 4 GiB to 1 %."""
    s = cl.load_card("Llama-2-7b-hf")
    exact = [2 * n * cl.count_params(s).total / (n * cl.weight_bytes(s, "bf16")) for n in (1, 512)]
    exact[1] *= 512
    L5.check_tys2(1, 512, "memory", "compute")
    L5.check_tys2(*exact, " Memory", "COMPUTE")
    L5.check_tys1("keys_and values", 4.03)
    assert "not within the tolerance" in fails(L5.check_tys1, "keys and values", 4.1)


@pytest.mark.parametrize("answer, phrase", [
    ((23, "memory"), "the weights must fit too"),
    ((32, "memory"), "factor 2"),
    ((17, "memory"), "not GiB"),
    ((16, "compute"), "ridge point"),
    ((16.5, "memory"), "whole number"),
    ((30, "memory"), "your requests_fit"),
])
def test_recap_mistakes(answer, phrase):
    msg = fails(L5.check_recap, *answer)
    assert phrase in msg
    shows_none_of(msg, 16)


# --- the notebook's graded cells ---------------------------------------------------------------

CHECK_CALL = re.compile(r"^(lesson5\.check_\w+\(|assert\b)")


def test_notebook_grading_cells_are_well_formed():
    nb, answers, tests = graded_cells(NOTEBOOK, CHECK_CALL)
    assert set(tests) == {"generate-cached", "kv-cache-size", "flops-per-weight-byte",
                          "ridge-point", "requests-fit", "tys1", "tys2", "recap"}


def test_every_check_publishes_records_for_the_grader(monkeypatch, capsys):
    """Under grading (COURSE_CHECK_RECORDS=1) each passing check publishes records (printed
    outside a kernel), and a cached loop written another way publishes the same ones."""
    from course_lib.checks import records

    monkeypatch.setenv(records.ENV, "1")

    def published(run) -> list[str]:
        run()
        return [ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("COURSE-CHECK-RECORD ")]

    gen = published(lambda: L5.check_generate_cached(gen_right))
    assert len(gen) == 4 and '"check": "close"' in gen[1] and '"check": "close"' in gen[3]

    @torch.no_grad()
    def exact_calls(model, prompt, n_new):  # n_new calls, not n_new + 1
        tokens, out = prompt, model.run(prompt)
        for i in range(n_new):
            new = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, new], 1)
            if i < n_new - 1:
                out = model.run(new, out.kvs)
        return tokens

    assert published(lambda: L5.check_generate_cached(exact_calls)) == gen
    for run in (lambda: L5.check_kv_cache_size(kv_right),
                lambda: L5.check_flops_per_weight_byte(intensity_right),
                lambda: L5.check_ridge_point(ridge_right),
                lambda: L5.check_requests_fit(requests_right),
                lambda: L5.check_tys1("keys and values", 4.0),
                lambda: L5.check_tys2(1, 512, "memory", "compute"),
                lambda: L5.check_recap(16, "memory")):
        assert published(run)


# --- #13/#16: the visible tests catch what the registry lists ---------------------------------------

def test_float_token_ids_are_refused_naming_the_type():
    msg = fails(L5.check_generate_cached, lambda model, prompt, n_new: gen_right(model, prompt, n_new).float())
    assert "integer token ids" in msg and "torch.float32" in msg


def test_every_function_check_tries_an_input_made_at_run_time():
    assert L5.RANDOM_GEN_CASE in L5.GEN_CASES and L5.RANDOM_KV_CASE in L5.KV_CASES
    assert L5.RANDOM_INTENSITY_CASE in L5.INTENSITY_CASES and L5.RANDOM_RIDGE_CASE in L5.RIDGE_CASES
    assert L5.RANDOM_REQUEST_CASE in L5.REQUEST_CASES
    # the first visible case's tokens, whatever the model: the run-time case catches it
    first = L5.GEN_CASES[0]
    fixed = gen_right(L5.toy_model(first["shape"], first["seed"]),
                      L5._prompt(L5.toy_model(first["shape"], first["seed"]), first["batch"],
                                 first["prompt_len"], first["seed"]), first["n_new"])

    def hard_coded(model, prompt, n_new):   # a cached loop, then the first case's tokens
        gen_right(model, prompt, n_new)
        return fixed

    assert fails(L5.check_generate_cached, hard_coded).startswith(L5.RANDOM_TAG)





