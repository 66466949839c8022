"""benchmarks/vllm_generate.py without vLLM (a GPU machine's): its --help, and the vote that turns
the samples and the head's scores into the answer, as the search's weighted vote does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.vllm_generate import voted

REPO = Path(__file__).resolve().parents[2]


def test_help_runs_without_vllm():
    proc = subprocess.run(
        [sys.executable, "benchmarks/vllm_generate.py", "--help"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "--hf" in proc.stdout, proc.stderr[-2000:]


def test_the_answer_with_the_most_weight_wins_answers_compared_as_math():
    # 18 twice at 0.2 against 3 once at 0.9; "18.0" is the same answer as "18"
    assert voted(["18", "3", "18.0", None], [0.2, 0.9, 0.2, 1.0]) == "3"
    assert voted(["18", "3", "18.0"], [1.0, 1.0, 1.0]) == "18"
    assert voted([None, None], [1.0, 1.0]) is None
