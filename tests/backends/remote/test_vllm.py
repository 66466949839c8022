"""The remote backend against a real vLLM (issue 66), on the GPU machine only (vllm_server.py says
what the lease sets up; skipped elsewhere): the served judge read from vLLM's logprobs, `n` draws in
one request, a search and a bench through the CLI, and two servers on one card, one killed
mid-search."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_server import VLLMServer, vllm_ready

from edgereason.backends.remote import Endpoint, open_generator, open_verifier
from edgereason.config import SamplingParams
from edgereason.protocols import BatchEntry
from tests.backends.remote.test_cli_remote import run_cli
from tests.backends.remote.test_several_servers import QUESTIONS, SEARCH, SMALL, search_stopping
from tests.backends.remote.test_verifier import REQUESTS, local_scores

pytestmark = pytest.mark.skipif(
    not vllm_ready(), reason="vLLM runs on the GPU machine (EDGEREASON_VLLM_SITE, _MODEL)"
)


@pytest.fixture(scope="module")
def vllm() -> Iterator[VLLMServer]:
    srv = VLLMServer()
    yield srv
    srv.stop()


def test_the_judge_is_read_from_vllms_logprobs(vllm: VLLMServer, smollm2_path: Path, smollm2):
    remote = open_verifier(smollm2_path, "judge", Endpoint(vllm.url))
    try:
        got = [r.scores for r in remote.score(REQUESTS)]
    finally:
        remote.close()
    assert [len(s) for s in got] == [3, 1]
    # vLLM serves the GGUF's weights dequantized to bf16 (the export), llama.cpp reads them in Q4_1
    for g, w in zip(got, local_scores(smollm2)):
        assert all(0 <= s <= 1 for s in g) and g == pytest.approx(w, abs=0.15)


def test_n_draws_are_one_request(vllm: VLLMServer, smollm2_path: Path) -> None:
    """vLLM answers `n` choices (llama-cpp-python's server answers one, and gets n requests)."""
    gen = open_generator(smollm2_path, Endpoint(vllm.url), 2048, step_tokens=32)
    try:
        root = gen.new_seq()
        first = gen.step([BatchEntry(root, gen.tokenize("Q: 2+2?\n"))], [3], SamplingParams(seed=7))
        assert len(first[0]) == 3 and gen.client.stats.per_batch == [1]
    finally:
        gen.close()


def test_a_solve_and_a_bench_through_vllm(vllm: VLLMServer, smollm2_path: Path, tmp_path: Path):
    solve = run_cli("solve", QUESTIONS[0], "--model", str(smollm2_path), "--backend", "remote",
                    "--base-url", vllm.url, "--json", *SEARCH)  # fmt: skip
    assert solve.returncode == 0 and "Traceback" not in solve.stderr, solve.stderr
    tree = json.loads(solve.stdout)["tree"]["nodes"]
    assert tree and all(n["score"] is None or 0 <= n["score"] <= 1 for n in tree)
    data = tmp_path / "two.jsonl"
    rows = [{"id": f"p{i}", "problem": q, "answer": "0"} for i, q in enumerate(QUESTIONS)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench = run_cli("bench", "--dataset", str(data), "--out", str(tmp_path / "out"), "--no-plots",
                    "--policies", "baseline", "--model", str(smollm2_path), "--backend", "remote",
                    "--base-url", vllm.url, *SEARCH)  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    run = json.loads((tmp_path / "out" / "results.json").read_text())["runs"][0]
    counts = run["requests_per_server"][vllm.url]
    assert counts["generator"] > 0 and counts["prm"] > 0


def test_two_vllms_on_one_card_one_killed_mid_search(
    vllm: VLLMServer, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = VLLMServer()
    endpoints = [Endpoint(srv.url, retries=1) for srv in (vllm, other)]
    try:
        results, killed_at, answered = search_stopping(smollm2_path, endpoints, other.stop, 1)
    finally:
        other.stop()
    assert [r.status for r in results] == ["done", "done"], [r.reason for r in results]
    assert all(sum(p.potential for p in r.paths) == SMALL.beams for r in results)
    assert killed_at[0] > 0  # the killed server had served the generator, and nothing after
    assert answered[0][1] == killed_at[0] and answered[1][1] == killed_at[1]
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(r"stopped answering .*other 1 server", lines[0]), lines
