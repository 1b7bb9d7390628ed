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
    (lambda t: ["size", "gpt2", "--gpu-memory", "80"], "give a unit: 80GB (80 x 10^9 bytes) or 80GiB"),
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


# --- the families of 2026, --verify and families the counters do not support ----------------

def test_json_for_a_2026_card_has_its_cache_by_layer_kind():
    r = run("size", "gemma-3-1b-it", "--context", "32768", "--dtype", "bf16", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    s = cl.load_card("gemma-3-1b-it")
    p = cl.count_params(s)
    assert (out["total_params"], out["active_params"]) == (p.total, p.active) == \
        (999_885_952, 999_885_952)
    kinds = {k["kind"]: k for k in out["kv_cache_by_layer_kind"]}
    assert kinds["full_attention"]["n_layers"] == 4 and kinds["sliding_attention"]["n_layers"] == 22
    assert kinds["sliding_attention"]["tokens_kept"] == 512
    assert kinds["full_attention"]["tokens_kept"] == 32768
    assert out["kv_cache_bytes_per_sequence"] == sum(k["bytes_per_sequence"] for k in kinds.values())
    assert out["kv_cache_bytes_per_token"] == 26 * 2 * 1 * 256 * 2


def test_verify_table(capsys):
    from course_lib.cli import main
    assert main(["size", "Qwen3-30B-A3B", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "course_lib agrees with transformers on every part" in out
    assert out.count("30,532,122,624") == 3  # the size table, and both columns of the total


@pytest.mark.parametrize("name", cl.card_names())
def test_verify_every_shipped_card(name, capsys):
    from course_lib.cli import main
    assert main(["size", name, "--verify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verify"]["agrees"]
    parts = {p["part"]: p for p in out["verify"]["parts"]}
    assert parts["total"]["transformers"] == out["total_params"]
    assert all(p["difference"] == 0 for p in parts.values())


def test_verify_shows_the_part_that_differs():
    """A count that forgets Qwen3's q/k norms: verify names attention and the difference."""
    from course_lib.verify import format_verification, verify_config
    s = cl.load_card("Qwen3-8B")
    v = verify_config(cl.card_config("Qwen3-8B"), s.with_(qk_norm=None))
    wrong = {c.part: c.difference for c in v.parts if not c.agrees}
    assert wrong == {"attention": -36 * 2 * 128} and not v.agrees
    assert v.total.difference == -36 * 2 * 128
    table = format_verification(v)
    assert "DIFFERS by -9,216" in table and "DISAGREES" in table


def test_verify_exit_status_1_when_a_part_differs(tmp_path, monkeypatch, capsys):
    from course_lib import cli
    real = cli.shape_from_config
    monkeypatch.setattr(cli, "shape_from_config",
                        lambda cfg, name="": real(cfg, name).with_(head_bias=False))
    assert cli.main(["size", "phi-2", "--verify"]) == 1
    assert "output_head" in capsys.readouterr().out


def test_unsupported_decoder_family(tmp_path):
    cfg = {"model_type": "bloom", "hidden_size": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100}
    path = _write(tmp_path, json.dumps(cfg))
    r = run("size", path)
    assert r.returncode == 2 and r.stdout == ""
    line = r.stderr.strip()
    assert "unsupported model_type 'bloom': a decoder-only family transformers knows" in line
    assert all(f in line for f in cl.SUPPORTED_MODEL_TYPES)
    r = run("size", path, "--verify", "--json")
    assert r.returncode == 2 and "unsupported model_type 'bloom'" in r.stderr
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))
    out = json.loads(r.stdout)
    assert out == {"model_type": "bloom", "supported": False,
                   "transformers_total_params": sum(p.numel() for p in model.parameters())}


def test_verify_without_transformers(monkeypatch, capsys):
    from course_lib import cli
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    assert cli.main(["size", "gpt2", "--verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--verify needs torch and transformers" in err[0]
