"""`--backend remote` from the command line: bad flags and a dead server are one line; a search
through llama-cpp-python's server prints the same JSON as a local one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from evil_server import Evil, evil_server, gzip_bomb
from remote_server import LocalServer, free_port

SMALL = [
    "--beams",
    "2",
    "--width",
    "2",
    "--max-steps",
    "2",
    "--max-step-tokens",
    "40",
    "--max-tokens",
    "80",
]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edgereason", *args], capture_output=True, text=True, timeout=600
    )


def one_line_error(proc: subprocess.CompletedProcess, code: int, needle: str) -> None:
    assert proc.returncode == code, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr and len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--base-url", "http://127.0.0.1:1"], "add --backend remote"),
        (["--backend", "remote"], "needs --base-url"),
        (
            ["--backend", "remote", "--base-url", "127.0.0.1:8080"],
            "--base-url must be an http(s) URL",
        ),
        # named --base-url before
        (["--prm-base-url", "localhost:8080"], "--prm-base-url must be an http(s) URL"),
        # each of these was a traceback at the first request, exit 1 (ValueError, OverflowError,
        # InvalidURL)
        (
            ["--backend", "remote", "--base-url", "http://127.0.0.1:99999"],
            "port that is not a number from 1",
        ),
        (
            ["--backend", "remote", "--base-url", "http://127.0.0.1:-1"],
            "port that is not a number from 1",
        ),
        (
            ["--backend", "remote", "--base-url", "http://127.0.0.1:abc"],
            "port that is not a number from 1",
        ),
        (["--backend", "remote", "--base-url", "http://127.0.0.1:"], "has no port after its colon"),
        (
            ["--backend", "remote", "--base-url", "http://[::1"],
            "in brackets that is no IPv6 address",
        ),
        (
            ["--backend", "remote", "--base-url", "http://[zz::1]:80"],
            "in brackets that is no IPv6 address",
        ),
        (["--prm-base-url", "http://1.2.3.999:80"], "--prm-base-url must be an http(s) URL"),
        (["--prm-base-url", "http://127.0.0.1:1,"], "--prm-base-url has an empty value"),
        (
            ["--backend", "remote", "--base-url", "http://127.0.0.1:1", "--remote-retries", "-1"],
            "--remote-retries",
        ),
        (
            ["--backend", "remote", "--base-url", "http://127.0.0.1:1", "--remote-max-answer", "0"],
            "--remote-max-answer must be a positive number of MiB, got 0.0",
        ),
        (
            ["--prm-base-url", "http://127.0.0.1:1", "--remote-max-answer", "nan"],
            "--remote-max-answer must be a positive number of MiB, got nan",
        ),
        (
            [
                "--backend",
                "remote",
                "--base-url",
                "http://127.0.0.1:1",
                "--api-key-env",
                "EDGEREASON_UNSET_KEY",
            ],
            "EDGEREASON_UNSET_KEY",
        ),
    ],
)
def test_bad_remote_flags(args: list[str], needle: str, smollm2_path: Path) -> None:
    one_line_error(run_cli("solve", "What is 1+1?", "--model", str(smollm2_path), *args), 2, needle)


def test_a_dead_server_is_one_line(smollm2_path: Path) -> None:
    proc = run_cli(
        "solve",
        "What is 1+1?",
        "--model",
        str(smollm2_path),
        "--backend",
        "remote",
        "--base-url",
        f"http://127.0.0.1:{free_port()}",
        "--remote-retries",
        "0",
    )
    one_line_error(proc, 1, "is it running?")


def test_credentials_in_a_url_are_shown_as_stars(smollm2_path: Path) -> None:
    """The password was printed in the error line."""
    url = f"http://user:s3cret@127.0.0.1:{free_port()}"
    model = ["--model", str(smollm2_path)]
    proc = run_cli(
        "solve", "1+1?", *model, "--backend", "remote", "--base-url", url, "--remote-retries", "0"
    )
    one_line_error(proc, 1, "cannot reach the server at http://***@127.0.0.1:")
    assert "s3cret" not in proc.stderr and "user" not in proc.stderr


def test_a_server_that_never_answers_is_reported_in_seconds(smollm2_path: Path) -> None:
    """With the default --remote-timeout and --remote-retries a silent server took about 8 minutes
    (four times the 120 s timeout) to report; the checks at opening wait 10 s for an answer and do
    not retry a timeout."""
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        t0 = time.monotonic()
        proc = run_cli(
            "solve",
            "What is 1+1?",
            "--model",
            str(smollm2_path),
            "--backend",
            "remote",
            "--base-url",
            url,
        )
        took = time.monotonic() - t0
    one_line_error(proc, 1, f"cannot reach the server at {url} (no answer within 10s) after 1 try")
    assert took < 30, took


def searched_evilly(evil: Callable[[Evil], None]) -> Callable[[Evil], None]:
    """A server that answers the checks at opening and the PRM's one-token scores, and each
    generator step (max_tokens > 1) with `evil`."""
    logprobs = {"tokens": ["Yes"], "token_logprobs": [-0.1], "top_logprobs": [{"Yes": -0.1}]}
    score = {"choices": [{"text": "Yes", "finish_reason": "length", "logprobs": logprobs}]}

    def answer(h: Evil) -> None:
        if h.path == "/v1/models":
            h.send_json({"data": [{"id": "m"}]})
        elif h.path != "/v1/completions":
            h.send_json({"error": "no such endpoint"}, status=404)
        elif h.asked.get("max_tokens", 1) > 1:
            evil(h)
        else:
            h.send_json(score)

    return answer


def drip(h: Evil) -> None:
    def drops() -> Iterator[bytes]:
        while True:
            time.sleep(1)
            yield b" "

    h.stream(drops(), length=1000)


BOMB = gzip_bomb(2048)  # 2 MB of gzip, 2 GiB of JSON: `solve` grew to 6.4 GB
MILLION = json.dumps({"choices": [{"text": "2", "finish_reason": "stop"}] * 1_000_000}).encode()


@pytest.mark.parametrize(
    ("evil", "flags", "needle"),
    [
        (
            lambda h: h.send_bytes(BOMB, {"Content-Encoding": "gzip"}),
            [],
            "sent more than 4 MiB in its answer to /v1/completions (--remote-max-answer raises it)",
        ),
        (lambda h: h.send_bytes(MILLION), [], "sent more than 4 MiB in its answer"),
        (drip, ["--remote-timeout", "3"], "bytes in 3s (--remote-timeout raises it)"),
    ],
)
def test_a_server_that_sends_too_much_or_too_slowly_ends_a_search_with_one_line(
    evil, flags: list[str], needle: str, smollm2_path: Path
) -> None:
    """A gzip bomb was "unexpected MemoryError"; a million choices where two were asked took 114 s
    and 3.8 GB, then exit 0; a drip lived until the batch's deadline (4 x --remote-timeout)."""
    with evil_server(searched_evilly(evil)) as url:
        t0 = time.monotonic()
        proc = run_cli(
            "solve", "What is 1+1?", "--model", str(smollm2_path), "--backend", "remote",
            "--base-url", url, "--served-model", "m", "--beams", "1", "--width", "2", *flags,
        )  # fmt: skip
        took = time.monotonic() - t0
    one_line_error(proc, 1, f"the server at {url} ")
    assert needle in proc.stderr and took < 60, (proc.stderr, took)


def test_the_value_head_is_refused_for_a_served_prm(smollm2_path: Path) -> None:
    proc = run_cli(
        "solve",
        "What is 1+1?",
        "--model",
        str(smollm2_path),
        "--prm-base-url",
        "http://127.0.0.1:1",
        "--prm-format",
        "head",
        "--prm-head",
        "x.safetensors",
    )
    one_line_error(proc, 2, "cannot be served")


@pytest.mark.slow
def test_solve_json_through_the_server_has_the_local_fields(
    server: LocalServer, smollm2_path: Path
) -> None:
    remote = run_cli(
        "solve",
        "What is 12 * 7 - 5?",
        "--model",
        str(smollm2_path),
        "--backend",
        "remote",
        "--base-url",
        server.url,
        "--json",
        *SMALL,
    )
    assert remote.returncode == 0, remote.stderr
    local = run_cli(
        "solve",
        "What is 12 * 7 - 5?",
        "--model",
        str(smollm2_path),
        "--json",
        "--kv-tokens",
        "2048",
        "--threads",
        "2",
        *SMALL,
    )
    assert local.returncode == 0, local.stderr
    r, here = json.loads(remote.stdout), json.loads(local.stdout)
    assert (
        r["status"] == "done" and set(r) == set(here) and set(r["metrics"]) == set(here["metrics"])
    )
    assert r["metrics"]["auto_policy"]["preset"] == "baseline"
    assert 1 <= len(r["paths"]) <= 2 and set(r["paths"][0]) == set(here["paths"][0])
    assert set(r["tree"]["nodes"][0]) == set(here["tree"]["nodes"][0])


@pytest.mark.slow
def test_a_local_generator_with_a_served_prm(server: LocalServer, smollm2_path: Path) -> None:
    proc = run_cli(
        "solve",
        "What is 12 * 7 - 5?",
        "--model",
        str(smollm2_path),
        "--prm-base-url",
        server.url,
        "--json",
        "--kv-tokens",
        "2048",
        "--threads",
        "2",
        *SMALL,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "done" and out["metrics"]["prm_calls"] >= 1
    assert all(0 <= n["score"] <= 1 for n in out["tree"]["nodes"] if n["score"] is not None)


@pytest.mark.slow
def test_a_value_head_scores_here_beside_a_served_generator(
    server: LocalServer, smollm2, smollm2_path: Path, tmp_path: Path
) -> None:
    """--backend remote --prm-format head: the generator is served and the head scores here on
    llama.cpp (a server returns 20 log-probabilities, a head reads thousands of logits). The scores
    in the JSON are the head's own for those steps, scored again here."""
    from edgereason.backends.llamacpp import LlamaVerifier
    from edgereason.backends.prm_format import PRM_FORMATS
    from edgereason.heads.value_head import save_head
    from edgereason.protocols import ScoreRequest
    from tests.backends.test_llamacpp_verifier import _random_head

    head = _random_head(smollm2)
    weights, _ = save_head(head, tmp_path / "head")
    question = "What is 12 * 7 - 5?"
    served = [
        "--model",
        str(smollm2_path),
        "--backend",
        "remote",
        "--base-url",
        server.url,
        "--prm-format",
        "head",
    ]
    proc = run_cli("solve", question, *served, "--prm-head", str(weights), "--json", *SMALL)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["backend"] == "remote" and result["paths"]
    steps = result["paths"][0]["steps"]
    local = LlamaVerifier(smollm2, PRM_FORMATS["head"], 4096, head=head)
    try:
        again = local.score(
            [ScoreRequest("p", question, [s["text"] for s in steps], list(range(len(steps))))]
        )
    finally:
        local.close()
    assert again[0].scores == pytest.approx([s["score"] for s in steps], abs=0.02)
    # naming a server for it as well is a contradiction: one line
    refused = run_cli(
        "solve", question, *served, "--prm-head", str(weights), "--prm-base-url", server.url
    )
    one_line_error(refused, 2, "cannot be served")
