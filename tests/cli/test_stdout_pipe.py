"""stdout piped into `head -c 5`, which quits (cli/stdout_pipe.py): every command that writes to
stdout stops with 141, no traceback, no "Exception ignored", and claims nothing it did not do.

Before: `data convert big.jsonl | head -c 5` said "converted 200000 records" and exited 0 after one
64 KB write (PYTHONUNBUFFERED's stdout dropped the rest of a cut write); with Python's default
buffering `models list`, `--help` and `--version` exited 120 with "Exception ignored ...
BrokenPipeError"; with PYTHONUNBUFFERED `--help` and `--version` exited 0 (argparse drops the
error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAST = ["--max-steps", "1", "--max-step-tokens", "8", "--beams", "2", "--width", "2"]
BUFFERING = {"unbuffered": {"PYTHONUNBUFFERED": "1"}, "buffered": {}}


def environment(buffering: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return env | BUFFERING[buffering]


def into_head_that_quit(args: list[str], buffering: str = "unbuffered") -> tuple[int, str]:
    """Run the real CLI with stdout piped into `head -c 5` that has read its 5 bytes and quit:
    (exit code, stderr)."""
    read, write = os.pipe()
    head = subprocess.Popen(["head", "-c", "5"], stdin=read, stdout=subprocess.DEVNULL)
    os.close(read)
    os.write(write, b"first")
    head.wait(timeout=60)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "edgereason", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(buffering),
            cwd=REPO,
            timeout=600,
        )
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


def assert_stopped_quietly(code: int, stderr: str) -> None:
    assert code == 141, stderr
    for said in ("Traceback", "Exception ignored", "unexpected", "converted"):
        assert said not in stderr, stderr


def gsm8k_records(count: int) -> str:
    """GSM8K's own format, `count` records (200,000: 14 MB)."""
    return "".join(
        json.dumps({"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"})
        + "\n"
        for i in range(count)
    )


@pytest.fixture(scope="module")
def big_set(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sets") / "big.jsonl"
    path.write_text(gsm8k_records(200_000))
    return path


@pytest.mark.parametrize("buffering", sorted(BUFFERING))
@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["solve", "--help"],
        ["models", "list"],
        ["models", "list", "--json"],
        ["models", "path", "smollm2-135m"],
        # a mistyped flag's JSON, and a failure's: written after the reader quit
        ["memory-profile", "--json", "--device", "tpu"],
        ["solve", "   ", "--json", "--model", "smollm2-135m", "--prm", "self"],
    ],
)
def test_a_command_without_a_model_run(args, buffering, smollm2_path):
    assert_stopped_quietly(*into_head_that_quit(args, buffering))


@pytest.mark.parametrize("buffering", sorted(BUFFERING))
def test_data_convert_claims_nothing(tmp_path, buffering):
    given = tmp_path / "train.jsonl"
    given.write_text(gsm8k_records(3))
    assert_stopped_quietly(*into_head_that_quit(["data", "convert", str(given)], buffering))


@pytest.mark.parametrize("buffering", sorted(BUFFERING))
def test_data_convert_whose_reader_quits_in_the_middle(big_set, buffering):
    """The issue's own pipeline: head takes 5 bytes of the first 64 KB and quits while convert
    writes the rest."""
    script = f'"{sys.executable}" -m edgereason data convert "{big_set}" | head -c 5'
    proc = subprocess.run(
        ["bash", "-c", script + '; echo " ${PIPESTATUS[0]}"'],
        capture_output=True,
        text=True,
        env=environment(buffering),
        cwd=REPO,
        timeout=600,
    )
    assert proc.stdout == '{"id" 141\n', proc.stdout
    assert_stopped_quietly(141, proc.stderr)


def test_data_convert_read_to_the_end_writes_every_record(big_set):
    proc = subprocess.run(
        [sys.executable, "-m", "edgereason", "data", "convert", str(big_set)],
        capture_output=True,
        text=True,
        env=environment("unbuffered"),
        timeout=600,
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 200_000
    assert proc.stderr.endswith("converted 200000 records (gsm8k) to stdout; skipped 0\n")


@pytest.mark.slow
@pytest.mark.parametrize("json_out", [True, False], ids=["json", "text"])
def test_solve(smollm2_path, json_out):
    args = ["solve", "What is 2+3?", "--model", str(smollm2_path), "--prm", "self", *FAST]
    # Python's own buffering: the answer was still in the buffer at exit (120 before)
    args += ["--json"] if json_out else []
    assert_stopped_quietly(*into_head_that_quit(args, "buffered"))


@pytest.mark.slow
def test_bench(tmp_path, smollm2_path):
    dataset = tmp_path / "one.jsonl"
    dataset.write_text('{"id": "a", "problem": "What is 2+3?", "answer": "5"}\n')
    args = ["bench", "--dataset", str(dataset), "--policies", "baseline", "--no-plots"]
    args += ["--model", str(smollm2_path), "--out", str(tmp_path / "out"), *FAST]
    assert_stopped_quietly(*into_head_that_quit(args, "buffered"))
