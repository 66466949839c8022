"""Bad input exits non-zero with one clear line and no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def assert_clean_error(
    proc: subprocess.CompletedProcess, needle: str, code: int | None = None
) -> None:
    assert proc.returncode != 0 if code is None else proc.returncode == code
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines and needle in lines[-1], proc.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--strategy", "beam", "--beams", "6", "--width", "4"], "not divisible"),
        (["--beams", "0"], "positive"),
        (["--max-steps", "-1"], "positive"),
        (["--temperature", "-0.5"], "temperature"),
        (["--policy", "warp-speed"], "unknown policy"),
        (["--policy", "edge:bogus=1"], "bad policy override"),
        # refused by the flag the user typed
        (["--temperature", "nan"], "--temperature must be a finite number >= 0"),
        (["--temperature", "inf"], "--temperature must be a finite number >= 0"),
        (["--spec-slots", "inf"], "--spec-slots (spec_slots) must be a finite number >= 0"),
        (
            ["--policy", "edge:spec_slots=nan"],
            "--spec-slots (spec_slots) must be a finite number >= 0",
        ),
        (["--max-tokens", "0"], "--max-tokens must be a positive number"),
        (["--perfect-score", "5"], "--perfect-score (perfect_score) must be in (0, 1]"),
        (["--kv-budget", ""], "not a size: ''"),
        (["--gpu-memory", ""], "not a size: ''"),
        # 10,000 threads looked like a hang
        (["--threads", "100000"], "--threads 100000 is more than this machine's"),
    ],
)
def test_impossible_settings(args, needle, smollm2_path):
    assert_clean_error(
        run_cli("solve", "What is 1+1?", "--model", str(smollm2_path), *args), needle, code=2
    )


def test_missing_model_file(tmp_path):
    assert_clean_error(
        run_cli("solve", "What is 1+1?", "--model", str(tmp_path / "nope.gguf")), "not found"
    )


def test_corrupt_gguf(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    assert_clean_error(run_cli("solve", "What is 1+1?", "--model", str(bad)), "could not load")
    worse = tmp_path / "worse.gguf"
    worse.write_bytes(b"not a model")
    assert_clean_error(run_cli("solve", "What is 1+1?", "--model", str(worse)), "not a GGUF")


def test_empty_problem(smollm2_path):
    assert_clean_error(run_cli("solve", "-", "--model", str(smollm2_path), stdin="   \n"), "empty")


ZERO_WIDTH = "\u200b\u200b \u2060\ufeff"  # zero-width spaces, a word joiner, a BOM mid-text


@pytest.mark.parametrize("where", ["argument", "stdin"])
def test_a_problem_of_zero_width_characters_alone_is_refused(smollm2_path, where):
    """It passed the check for an empty problem, and the search ran on nothing to solve."""
    problem, stdin = ("-", ZERO_WIDTH) if where == "stdin" else (ZERO_WIDTH, None)
    proc = run_cli("solve", problem, "--model", str(smollm2_path), stdin=stdin)
    assert_clean_error(proc, "no visible characters (only zero-width or other invisible", code=2)
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""


def test_a_dataset_row_of_zero_width_characters_alone_is_named(smollm2_path, tmp_path):
    data = tmp_path / "set.jsonl"
    data.write_text(json.dumps({"id": "blank", "problem": ZERO_WIDTH, "answer": "1"}) + "\n")
    proc = run_cli(
        "bench",
        "--dataset",
        str(data),
        "--model",
        str(smollm2_path),
        "--out",
        str(tmp_path / "out"),
    )
    assert_clean_error(proc, f"{data}:1: the problem has no visible characters", code=2)
    assert proc.stderr.count("\n") == 1


def test_prompt_longer_than_context(smollm2_path):
    long = "How many apples? " * 400
    assert_clean_error(
        run_cli("solve", long, "--model", str(smollm2_path), "--kv-tokens", "512"),
        "KV memory holds",
    )


def test_unknown_model_name():
    assert_clean_error(run_cli("solve", "1+1", "--model", "gpt-17"), "unknown model", code=2)


def test_solve_json_on_smollm2(smollm2_path):
    import json

    proc = run_cli(
        "solve",
        "What is 2+3?",
        "--model",
        str(smollm2_path),
        "--beams",
        "2",
        "--width",
        "2",
        "--max-steps",
        "2",
        "--max-step-tokens",
        "24",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"answer", "paths", "tree", "metrics"}
    assert set(out["metrics"]) >= {
        "generated_tokens",
        "gen_time_s",
        "prm_time_s",
        "prm_calls",
        "prm_tokens",
        "wall_s",
        "goodput_tok_s",
        "waiting_ratio",
    }
    assert out["paths"] and all({"steps", "score", "answer"} <= set(p) for p in out["paths"])
    assert all({"id", "parent", "text", "score", "status"} <= set(n) for n in out["tree"]["nodes"])
    # SmolLM2 has no recipe: best-of-n ran, which reads no --width; the note comes after the answer
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("note: best-of-n ran, which has no use for --width")
    )


def test_help_lists_subcommands():
    proc = run_cli("--help")
    for name in ("solve", "chat", "bench", "memory-profile", "models"):
        assert name in proc.stdout
    # a bad size fails before any work
    assert run_cli("memory-profile", "--budget", "lots").returncode == 2


def test_help_gives_each_command_its_own_defaults():
    """train-prm sets shorter paths than solve (GSM8K solutions are short); its help said solve's 40
    and 4096."""
    import re

    def default(command: str, flag: str) -> str:
        text = " ".join(run_cli(command, "--help-all").stdout.split())
        # not usage
        return re.search(r"(?<!\[)" + re.escape(flag) + r" \S+ .*?\(default ([^);]+)", text).group(
            1
        )

    assert (default("train-prm", "--max-steps"), default("train-prm", "--max-tokens")) == (
        "20",
        "1024",
    )
    assert (default("solve", "--max-steps"), default("solve", "--max-tokens")) == ("40", "4096")
    everything = " ".join(run_cli("train-prm", "--help-all").stdout.split())
    assert "(default best-of-n;" in everything  # --strategy's


def test_no_command_shows_the_commands_and_models_alone_lists_them():
    proc = run_cli()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert all(
        f"    {name}" in proc.stderr for name in ("solve", "chat", "bench", "train-prm", "models")
    )
    listed = run_cli("models")
    assert (
        listed.returncode == 0
        and "smollm2-135m" in listed.stdout
        and listed.stdout == run_cli("models", "list").stdout
    )
    as_json = [
        run_cli(*a)
        for a in (("models", "--json"), ("models", "list", "--json"), ("models", "--json", "list"))
    ]
    assert all(r.returncode == 0 for r in as_json) and len({r.stdout for r in as_json}) == 1
    assert "smollm2-135m" in [m["name"] for m in json.loads(as_json[0].stdout)["models"]]


def test_gpu_layers_without_a_gpu_build(smollm2_path):
    from edgereason.backends import load_backend

    if load_backend("llamacpp").supports_gpu():
        pytest.skip("this llama-cpp-python build has GPU support")
    assert_clean_error(
        run_cli("solve", "What is 1+1?", "--model", str(smollm2_path), "--gpu-layers", "999"),
        "no GPU support",
    )


def test_solve_with_an_hf_prm_on_torch(smollm2_path, tiny_hf_path):
    """The mixed pair end to end: SmolLM2 on llama.cpp, a tiny Hugging Face judge on torch (CPU)."""
    import json

    proc = run_cli(
        "solve",
        "What is 2+3?",
        "--model",
        str(smollm2_path),
        "--prm",
        f"hf:{tiny_hf_path}",
        "--prm-format",
        "judge",
        "--prm-device",
        "cpu",
        "--beams",
        "2",
        "--width",
        "2",
        "--max-steps",
        "2",
        "--max-step-tokens",
        "16",
        "--kv-tokens",
        "2048",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["metrics"]["prm_calls"] > 0 and out["metrics"]["prm_tokens"] > 0
    scores = [n["score"] for n in out["tree"]["nodes"] if n["score"] is not None]
    assert scores and all(0.0 <= s <= 1.0 for s in scores)
    # no progress bars from transformers in a search's output
    assert "Loading weights" not in proc.stderr
