"""A server cannot take the client's memory or time (issue 62, item 1): a gzip bomb, a huge body, an
endless stream, a slow drip, a million choices and a header flood each end as one line that names
the server and the limit, without a retry, while the client's peak memory (a child process's RSS)
grows by less than GREW_MB; a legitimate answer, compressed or raised past the default limit, is
still read."""

from __future__ import annotations

import gzip
import itertools
import json
import time
import zlib

import pytest
from evil_server import Evil, client_in_child, evil_server, gzip_bomb

from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.backends.remote_settings import Endpoint
from edgereason.errors import ConfigError

GREW_MB = 40  # a few tens of MB: at most one answer at the limit (4 MiB), and its JSON parsed
MODELS = {"data": [{"id": "m"}]}


def completion(**asked: object) -> str:
    return json.dumps({"prompt": [1, 2], "max_tokens": 4, **asked})


def over_limit(url: str, path: str, mib: str = "4") -> str:
    return (
        f"the server at {url} sent more than {mib} MiB in its answer to {path} "
        "(--remote-max-answer raises it)"
    )


def test_a_gzip_bomb_is_cut_at_the_limit_after_inflating() -> None:
    """2 MB that inflate to 2 GiB drove `solve` to 6.4 GB ("unexpected MemoryError"); httpx
    inflates each 64 KiB read whole, 63 MiB of this bomb, so the client inflates it itself."""
    bomb = gzip_bomb(2048)
    assert len(bomb) < 3 * 1024 * 1024
    with evil_server(lambda h: h.send_bytes(bomb, {"Content-Encoding": "gzip"})) as url:
        out = client_in_child(url, "models")
    assert out["said"] == over_limit(url, "/v1/models")
    assert out["grew_mb"] < GREW_MB and Evil.served == 1, out  # not retried


def test_a_huge_model_list_is_not_read_whole() -> None:
    """400 MB answering /v1/models was read whole (2.6 GB)."""
    body = itertools.chain([b'{"data": ['], itertools.repeat(b'{"id": "m"},' * 80_000))
    with evil_server(lambda h: h.stream(body, length=400 * 1024 * 1024)) as url:
        out = client_in_child(url, "models")
    assert out["said"] == over_limit(url, "/v1/models") and out["grew_mb"] < GREW_MB, out


def test_an_endless_answer_ends_at_the_limit() -> None:
    """A chunked answer that never ends (40 MB/s) grew for minutes until memory ran out."""
    body = itertools.chain([b'{"choices": ['], itertools.repeat(b" " * (1 << 20)))
    with evil_server(lambda h: h.stream(body)) as url:
        out = client_in_child(url, completion())
    assert out["said"] == over_limit(url, "/v1/completions") and out["seconds"] < 10, out
    assert out["grew_mb"] < GREW_MB and Evil.served == 1, out


def dripping() -> itertools.chain[bytes]:
    def drops():
        while True:
            time.sleep(1)
            yield b" "

    return itertools.chain([b'{"choices": '], drops())


def test_a_slow_drip_ends_at_the_remote_timeout() -> None:
    """One byte a second never broke httpx's timeout, which holds between bytes: the request lived
    until the batch's deadline, (retries + 1) times the timeout and more."""
    with evil_server(lambda h: h.stream(dripping(), length=10_000)) as url:
        out = client_in_child(url, completion(), timeout_s=3)
    assert out["said"].startswith(
        f"the server at {url} sent its answer to /v1/completions too slowly: "
    ), out
    assert out["said"].endswith("bytes in 3s (--remote-timeout raises it)"), out
    assert 3 <= out["seconds"] < 8 and Evil.served == 1, out  # not 4 x 3 s, as retried


def test_headers_that_drip_are_no_answer_and_retried() -> None:
    """Before the headers end, the server has not answered: a timeout, retried as before."""

    def drip_headers(h: Evil) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(30):
            h.wfile.write(b"X: 1\r\n")
            h.wfile.flush()
            time.sleep(0.5)

    with evil_server(drip_headers) as url:
        out = client_in_child(url, completion(), timeout_s=2, retries=1)
    assert "(no answer within 2s) after 2 tries" in out["said"], out
    assert out["seconds"] < 8 and Evil.served == 2, out


def test_a_header_flood_is_one_line() -> None:
    """h11 holds a header block to httpcore's 100 KiB; what is past it is one line, not retried."""

    def flood(h: Evil) -> None:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (8 << 20) + b"\r\n\r\n")

    with evil_server(flood) as url:
        out = client_in_child(url, "models")
    assert out["said"] == (
        f"the server at {url} answered /v1/models with a header block or chunk line over 100 KiB"
    )
    assert out["grew_mb"] < GREW_MB and Evil.served == 1, out


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (
            {"text": "1 + 1 = 2.", "finish_reason": "stop"},
            "sent more than 4 MiB in its answer to /v1/completions",
        ),
        ({}, "answered /v1/completions with more than 262144 JSON values"),
    ],
)
def test_a_million_choices_where_two_were_asked_is_one_line(choice, expected) -> None:
    """A million choices where n=2 was asked took 114 s and 3.8 GB, then exit 0: of real choices
    they are past the size limit; of empty ones (3 MB), past the JSON values an answer may hold."""
    data = json.dumps({"choices": [choice] * 1_000_000}).encode()
    with evil_server(lambda h: h.send_bytes(data)) as url:
        out = client_in_child(url, completion(n=2))
    assert expected in out["said"] and url in out["said"], out
    assert out["grew_mb"] < GREW_MB and out["seconds"] < 10, out


def refused(url: str, body: dict[str, object], **endpoint: object) -> str:
    client = CompletionClient(Endpoint(url, model="m", **endpoint))
    try:
        with pytest.raises(RemoteError) as err:
            client.complete([body])
    finally:
        client.close()
    return str(err.value)


def test_more_completions_or_tokens_than_asked_are_one_line() -> None:
    many = {"choices": [{"text": "x"}] * 1000}
    with evil_server(lambda h: h.send_json(many)) as url:
        assert refused(url, {"prompt": [1], "n": 2}) == (
            f"the server at {url} answered /v1/completions with 1000 completions where 2 were "
            "asked; is it an OpenAI-compatible server?"
        )
        assert Evil.served == 1
    long = {"choices": [{"text": "x" * 10_000}]}
    with evil_server(lambda h: h.send_json(long)) as url:
        assert "choices[0].text of 10000 characters where 4 tokens were asked" in refused(
            url, {"prompt": [1], "max_tokens": 4}
        )
    positions = {"choices": [{"text": "x", "logprobs": {"tokens": ["x"] * 3}}]}
    with evil_server(lambda h: h.send_json(positions)) as url:
        assert "choices[0].logprobs.tokens of 3 tokens where 1 were asked" in refused(
            url, {"prompt": [1], "max_tokens": 1, "logprobs": 2}
        )


def test_an_endless_error_answer_is_quoted_in_part_and_retried() -> None:
    """A 5xx is retried; its body is read to 64 KiB at most (only its first words are quoted)."""

    def body() -> itertools.chain[bytes]:  # each try's own
        return itertools.chain([b"overloaded "], itertools.repeat(b"x" * (1 << 20)))

    with evil_server(lambda h: h.stream(body(), status=503)) as url:
        out = client_in_child(url, completion(), retries=1)
    assert "(HTTP 503: overloaded xxx" in out["said"] and "after 2 tries" in out["said"], out
    assert out["grew_mb"] < GREW_MB and out["seconds"] < 10 and Evil.served == 2, out


@pytest.mark.parametrize(
    "encode",
    [
        lambda data: (gzip.compress(data), "gzip"),
        lambda data: (zlib.compress(data), "deflate"),
        lambda data: (zlib.compress(data)[2:-4], "deflate"),  # raw deflate, as some servers send
    ],
)
def test_a_compressed_answer_is_read(encode) -> None:
    data, coding = encode(json.dumps(MODELS).encode())
    with evil_server(lambda h: h.send_bytes(data, {"Content-Encoding": coding})) as url:
        client = CompletionClient(Endpoint(url))
        try:
            assert client.model == "m"
        finally:
            client.close()


def test_an_encoding_not_asked_for_is_one_line() -> None:
    with evil_server(lambda h: h.send_bytes(b"\x00" * 64, {"Content-Encoding": "br"})) as url:
        assert refused(url, {"prompt": [1]}) == (
            f"the server at {url} answered /v1/completions with Content-Encoding 'br' (it was "
            "asked for gzip, deflate); is it an OpenAI-compatible server?"
        )


def test_the_limit_can_be_raised() -> None:
    """A model list of 5 MiB: past the default limit, read under --remote-max-answer 8."""
    big = {"data": [{"id": "m", "about": "x" * 1000}] * 5200}
    with evil_server(lambda h: h.send_json(big)) as url:
        small = CompletionClient(Endpoint(url, retries=0))
        raised = CompletionClient(Endpoint(url, retries=0, max_answer_mib=8))
        try:
            with pytest.raises(RemoteError, match="more than 4 MiB"):
                small.model  # noqa: B018 - the request
            assert raised.model == "m"
        finally:
            small.close()
            raised.close()


@pytest.mark.parametrize("mib", [0.0, -1.0, float("nan"), float("inf")])
def test_a_limit_that_is_no_size_is_refused(mib: float) -> None:
    with pytest.raises(ConfigError, match="--remote-max-answer must be a positive number of MiB"):
        Endpoint("http://127.0.0.1:8080", max_answer_mib=mib)
