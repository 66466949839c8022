"""The paths a command writes to, as a user meets them in a terminal (issue 62, item 8): each
reproduced first through the real CLI in a child process.

- an output through a symbolic link to nothing (bench --out, train-prm --work and --out, data
  convert --out, models export DIR, memory-profile --plot) is one line naming the link and what it
  points to, before any model loads (bench said "File exists");
- an output path with escape sequences in its name is shown with them escaped, never run (bench's
  "results in ..." printed them raw);
- `data convert --out -` writes to stdout, as `-` reads stdin (it wrote a file named `-`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "gsm8k_sample.jsonl"  # 20 GSM8K test problems
RED = "\x1b[31m"  # an escape sequence: the rest of the terminal's text would turn red


def edgereason(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def one_error_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code and len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    return lines[0]


# every command that writes where the user says: the flag, and its command line with {out} for it
# (the models named are cached, or the line came before any pull)
SMOL = ["--model", "smollm2-135m"]
OUTPUTS = {
    "bench --out": ("--out", ["bench", *SMOL, "--dataset", str(SAMPLE), "--out", "{out}"]),
    "train-prm --work": (
        "--work",
        ["train-prm", *SMOL, "--dataset", str(SAMPLE), "--work", "{out}"],
    ),
    "train-prm --out": (
        "--out",
        ["train-prm", *SMOL, "--phases", "train", "--work", "{work}", "--out", "{out}"],
    ),
    "data convert --out": ("--out", ["data", "convert", str(SAMPLE), "--out", "{out}"]),
    "models export DIR": ("DIR", ["models", "export", "smollm2-135m", "{out}"]),
    "memory-profile --plot": ("--plot", ["memory-profile", *SMOL, "--plot", "{out}"]),
}


@pytest.mark.parametrize("below", [False, True], ids=["the link", "a path under it"])
@pytest.mark.parametrize("command", OUTPUTS)
def test_an_output_through_a_link_to_nothing_is_one_line(tmp_path, command, below) -> None:
    """bench said only "cannot write results to --out LINK: File exists"."""
    link, target = tmp_path / "link", tmp_path / "gone" / "results"
    link.symlink_to(target)
    out = link / "sub" if below else link
    flag, args = OUTPUTS[command]
    line = one_error_line(edgereason(*(a.format(out=out, work=tmp_path) for a in args)))
    assert line == (
        f"edgereason: error: {flag} {out}: {link} is a symbolic link to {target}, which does not "
        f"exist; create {target}, or give another {flag}"
    )
    assert not target.parent.exists() and link.is_symlink()


@pytest.mark.slow
def test_bench_shows_an_out_folder_named_with_escape_sequences_escaped(tmp_path) -> None:
    """Its last line, "results in ...", printed the folder's name raw: the escape sequence in it
    turned the terminal red."""
    out = tmp_path / f"bench{RED}red"
    fast = ["--policies", "baseline", "--beams", "2", "--width", "2", "--max-steps", "1"]
    proc = edgereason(
        "bench",
        "--dataset",
        str(SAMPLE),
        "--limit",
        "1",
        "--model",
        "smollm2-135m",
        *fast,
        "--max-step-tokens",
        "8",
        "--kv-tokens",
        "4096",
        "--no-plots",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert f"results in {tmp_path}/bench\\x1b[31mred/results.json" in proc.stderr
    assert "\x1b" not in proc.stderr + proc.stdout
    assert json.loads((out / "results.json").read_text())["runs"][0]["problems"] == 1


def test_data_convert_shows_its_out_file_with_escape_sequences_escaped(tmp_path) -> None:
    out = tmp_path / f"set{RED}.jsonl"
    proc = edgereason("data", "convert", str(SAMPLE), "--out", str(out))
    assert proc.returncode == 0 and "\x1b" not in proc.stderr, proc.stderr
    assert f"to {tmp_path}/set\\x1b[31m.jsonl; skipped 0" in proc.stderr
    assert len(out.read_text().splitlines()) == 20


def test_an_error_about_such_a_path_stays_one_line(tmp_path) -> None:
    taken = tmp_path / f"two\nlines{RED}"
    taken.write_text("a file, not a folder")
    line = one_error_line(edgereason("bench", "--dataset", str(SAMPLE), "--out", str(taken)))
    shown = f"{tmp_path}/two\\x0alines\\x1b[31m"
    assert line == f"edgereason: error: --out {shown} is a file; give a folder for the results"


def test_data_convert_out_dash_writes_to_stdout(tmp_path) -> None:
    """`--out -` wrote a file named `-` in the current folder."""
    proc = edgereason("data", "convert", str(SAMPLE), "--out", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 20 and rows[0]["answer"] == "18" and rows[0]["source"] == "gsm8k"
    assert proc.stderr == "converted 20 records (gsm8k) to stdout; skipped 0\n"
    assert list(tmp_path.iterdir()) == []
