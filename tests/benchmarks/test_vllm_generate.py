"""benchmarks/vllm_generate.py without vLLM (a GPU machine's): its --help, and the vote that turns
the samples and the head's scores into the answer, as the search's weighted vote does."""

from __future__ import annotations

from benchmarks.vllm_generate import voted


def test_help_runs_without_vllm(script_help):
    assert "--hf" in script_help("vllm_generate.py")


def test_the_answer_with_the_most_weight_wins_answers_compared_as_math():
    # 18 twice at 0.2 against 3 once at 0.9; "18.0" is the same answer as "18"
    assert voted(["18", "3", "18.0", None], [0.2, 0.9, 0.2, 1.0]) == "3"
    assert voted(["18", "3", "18.0"], [1.0, 1.0, 1.0]) == "18"
    assert voted([None, None], [1.0, 1.0]) is None
