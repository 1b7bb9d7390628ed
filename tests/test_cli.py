"""``python -m course_lib size``: JSON output and one-line errors with exit status 2."""
import json
import subprocess
import sys

import pytest

import course_lib as cl

KEYS = {"model_type", "total_params", "active_params", "embedding_params", "weight_bytes",
        "kv_cache_bytes_per_token", "kv_cache_bytes_per_sequence", "requests_that_fit",
        "forward_flops_per_token"}


def run(*args):
    return subprocess.run([sys.executable, "-m", "course_lib", *args], capture_output=True,
                          text=True, timeout=120)


def test_json_for_a_shipped_card():
    r = run("size", "Llama-2-7b-hf", "--context", "8192", "--dtype", "bf16",
            "--gpu-memory", "80GiB", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert KEYS <= out.keys()
    assert out["model_type"] == "llama"
    assert out["total_params"] == out["active_params"] == 6_738_415_616
    assert out["kv_cache_bytes_per_token"] == 2 * 32 * 32 * 128 * 2
    assert out["kv_cache_bytes_per_sequence"] == 4 * 2**30
    assert out["requests_that_fit"] == 16
    s = cl.load_card("Llama-2-7b-hf")
    assert out["forward_flops_per_token"] == cl.forward_flops_per_token(s, 8192)


def test_json_for_a_config_path(tmp_path):
    cfg = cl.card_config("Mixtral-8x7B-v0.1")
    folder = tmp_path / "mixtral"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    for target in (folder / "config.json", folder):
        r = run("size", str(target), "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert (out["total_params"], out["active_params"]) == (46_702_792_704, 12_879_925_248)
        assert out["dtype"] == "bfloat16" and out["context"] == 32768


def test_table_is_readable():
    r = run("size", "gpt2")
    assert r.returncode == 0
    assert "124,439,808" in r.stdout and "GiB" in r.stdout


def _write(tmp_path, text):
    p = tmp_path / "config.json"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("make_args,needle", [
    (lambda t: ["size", str(t / "missing.json")], "no such file"),
    (lambda t: ["size", _write(t, "{not json")], "not valid JSON"),
    (lambda t: ["size", _write(t, json.dumps({"model_type": "t5", "d_model": 512}))],
     "unsupported model_type 't5'; supported: gpt2, llama, mistral, mixtral"),
    (lambda t: ["size", _write(t, json.dumps({k: v for k, v in cl.card_config("Llama-2-7b-hf").items()
                                              if k != "hidden_size"}))], "hidden_size"),
    (lambda t: ["size", _write(t, json.dumps({**cl.card_config("Llama-2-7b-hf"), "num_attention_heads": 0}))],
     "n_heads=0"),
    (lambda t: ["size", _write(t, json.dumps({**cl.card_config("Llama-2-7b-hf"), "num_attention_heads": 3}))],
     "does not divide"),
    (lambda t: ["size", _write(t, json.dumps({**cl.card_config("gpt2"), "n_embd": "wide"}))],
     "d_model='wide'"),
    (lambda t: ["size", _write(t, "[1, 2]")], "JSON object"),
    (lambda t: ["size", "gpt2", "--gpu-memory", "lots"], "size"),
    (lambda t: ["size", "gpt2", "--dtype", "fp12"], "unknown dtype"),
    (lambda t: ["size", "gpt2", "--context", "-1"], "must be positive"),
    (lambda t: ["size", "no-such-card"], "no shipped card"),
    (lambda t: ["size"], "required"),
])
def test_errors_are_one_line_exit_2(tmp_path, make_args, needle):
    r = run(*make_args(tmp_path))
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and needle in lines[0]


def test_cards_lists_every_shipped_card_with_its_sizes():
    r = run("cards")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["card", "model_type"]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:] if not ln.startswith("*")}
    assert sorted(rows) == sorted(cl.card_names())
    for name, row in rows.items():
        s = cl.load_card(name)
        p = cl.count_params(s)
        assert row[1] == s.model_type
        assert row[2:4] == [f"{p.total:,}", f"{p.active:,}"], name
        assert row[4] == f"{cl.kv_cache_bytes_per_token(s, s.dtype or 'fp32'):,}", name
    mixtral = rows["Mixtral-8x7B-v0.1"]
    assert mixtral[2] == "46,702,792,704" and mixtral[3] != mixtral[2]  # experts: active < total
    names = run("cards", "--names")
    assert names.stdout.split() == cl.card_names()
