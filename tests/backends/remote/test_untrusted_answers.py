"""A server's answers are untrusted (issue 55, item 1): JSON of another shape than the completions,
models and tokenize APIs', bytes that are not JSON, broken HTTP and escape sequences in its messages
each end as one line naming the server, never a traceback; a fuzzed server for 500+ requests
included."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from remote_server import JSONHandler, serving

from edgereason.backends.llama_vocab import load_vocab
from edgereason.backends.prm_format import prm_format
from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.backends.remote.generator import RemoteGenerator
from edgereason.backends.remote.identity import PROBE, served_tokens
from edgereason.backends.remote.loop_thread import LoopThread
from edgereason.backends.remote.pool import ServerPool
from edgereason.backends.remote.verifier import RemoteVerifier
from edgereason.backends.remote_settings import Endpoint
from edgereason.config import SamplingParams
from edgereason.errors import EdgeReasonError
from edgereason.protocols import BatchEntry, ScoreRequest
from edgereason.util.terminal import safe_text

Reply = tuple[int, bytes, dict[str, str]]  # status, body, extra headers


class Answering(JSONHandler):
    """Answers every request with `reply(path)`: any status, any bytes, or bytes that are not HTTP
    at all."""

    reply: Callable[[str], Reply | bytes] = staticmethod(lambda path: (200, b"{}", {}))
    served = 0
    lock = threading.Lock()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer()

    def _answer(self) -> None:
        with Answering.lock:
            Answering.served += 1
            reply = Answering.reply(self.path)
        try:
            if isinstance(reply, bytes):  # not HTTP: the connection then closes
                self.wfile.write(reply)
                self.close_connection = True
                return
            status, body, headers = reply
            self.send_response(status)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (
            BrokenPipeError,
            ConnectionResetError,
        ):  # the client hung up on an answer it could not read
            self.close_connection = True


@pytest.fixture()
def answering() -> Iterator[Callable[[Callable[[str], Reply | bytes]], None]]:
    """Set how the server answers; the server's URL is `answering.url`."""

    def set_reply(reply: Callable[[str], Reply | bytes]) -> None:
        Answering.reply = staticmethod(reply)

    Answering.served = 0
    with serving(Answering) as url:
        set_reply.url = url  # type: ignore[attr-defined]
        yield set_reply


def one_safe_line(err: BaseException) -> str:
    """The error's message, checked to be one line with nothing a terminal would act on."""
    message = str(err)
    assert isinstance(err, EdgeReasonError), f"{type(err).__name__}: {message}"
    assert message and safe_text(message, one_line=True) == message, repr(message)
    return message


def refused_completion(url: str) -> RemoteError:
    """The error of a completion asked of the server at `url`, which must refuse or misanswer it."""
    client = CompletionClient(Endpoint(url, model="m", retries=0))
    try:
        with pytest.raises(RemoteError) as err:
            client.complete([{"prompt": [1, 2]}])
    finally:
        client.close()
    return err.value


def json_reply(body: Any, status: int = 200) -> Callable[[str], Reply]:
    return lambda path: (status, json.dumps(body).encode(), {"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("body", "wrong"),
    [
        ([], "the answer is a list, not an object"),
        ("choices", "the answer is a string, not an object"),
        ({"choices": {"text": "x"}}, "choices is an object, not a list"),
        ({"choices": ["x"]}, "choices[0] is a string, not an object"),
        ({"choices": [{"text": 7}]}, "choices[0].text is a number, not text"),
        ({"choices": [{"text": "x"}], "usage": []}, "usage is a list, not an object"),
        (
            {"choices": [{"text": "x"}], "usage": {"prompt_tokens": "12"}},
            "usage.prompt_tokens is a string",
        ),
        (
            {"choices": [{"text": "x", "logprobs": {"top_logprobs": [{"Yes": "0"}]}}]},
            "top_logprobs[0][0] is a",
        ),
    ],
)
def test_a_completion_of_another_shape_is_one_line_naming_the_server(
    answering, body, wrong
) -> None:
    """Each of these was an AttributeError or TypeError traceback (client._request,
    generator._tokens_of)."""
    answering(json_reply(body))
    message = one_safe_line(refused_completion(answering.url))
    assert (
        f"the server at {answering.url} answered /v1/completions with JSON of another shape"
        in message
    )
    assert wrong in message


@pytest.mark.parametrize("body", [[], "m", {"data": "m"}, {"data": ["m"]}, {"data": [{"id": 3}]}])
def test_a_model_list_of_another_shape_is_one_line_naming_the_server(answering, body) -> None:
    answering(json_reply(body))
    client = CompletionClient(Endpoint(answering.url, retries=0))
    try:
        with pytest.raises(RemoteError) as err:
            client.model  # noqa: B018 - the request
    finally:
        client.close()
    assert (
        f"the server at {answering.url} answered /v1/models with JSON of another shape"
        in one_safe_line(err.value)
    )


def test_an_error_message_with_escape_sequences_is_shown_as_text(answering) -> None:
    """The server's message reached stderr raw: a title change, a screen clear, colours, a
    hyperlink."""
    evil = (
        "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b]8;;http://x.invalid\x1b\\link\x9b1m\nsecond line\r"
    )
    answering(json_reply({"error": {"message": evil}}, status=400))
    message = one_safe_line(refused_completion(answering.url))
    assert "\\x1b]0;owned\\x07\\x1b[2J" in message and "second line" in message


def test_deep_json_and_undecodable_bodies_are_one_line(answering) -> None:
    """JSON nested past Python's depth raised RecursionError; a gzip body that is not gzip,
    httpx.DecodingError."""
    for reply in (
        lambda path: (200, b"[" * 100_000 + b"]" * 100_000, {}),
        lambda path: (200, b"\x00\x9f\xff not gzip", {"Content-Encoding": "gzip"}),
        lambda path: (500, b"[" * 100_000, {}),
    ):
        answering(reply)
        assert answering.url in one_safe_line(refused_completion(answering.url))


# ---------------------------------------------------------------- the fuzz
KEYS = (
    "choices text finish_reason usage prompt_tokens completion_tokens logprobs tokens "
    "token_logprobs top_logprobs token logprob stop_reason matched_stop data id error message "
    "detail object"
).split()
VALID = {
    "/v1/completions": {
        "choices": [
            {
                "text": "Yes",
                "finish_reason": "stop",
                "logprobs": {
                    "tokens": ["Yes"],
                    "token_logprobs": [-0.1],
                    "top_logprobs": [{"Yes": -0.1, "No": -2.5}],
                },
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    },
    "/v1/models": {"object": "list", "data": [{"id": "m", "object": "model"}]},
    "/tokenize": {"tokens": [1, 2, 3]},
}


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["null", "bool", "int", "float", "str"] + (["list", "dict"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, 1, -1, 7, 2**63, -(10**30), 10**400])
    if kind == "float":
        return rng.choice([0.5, -1e308, 1e308, float("nan"), float("inf"), -float("inf"), -0.0])
    if kind == "str":
        return rng.choice(["", "Yes", "No", "\x1b[2J", "a\nb", "\u202e", "\x9b1m", "stop", "\n\n"])
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(KEYS): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def mutated(rng: random.Random, value: Any) -> Any:
    """`value` with one random subtree replaced by a random value."""
    if not isinstance(value, (dict, list)) or not value or rng.random() < 0.3:
        return random_value(rng)
    value = dict(value) if isinstance(value, dict) else list(value)
    key = rng.choice(list(value)) if isinstance(value, dict) else rng.randrange(len(value))
    value[key] = mutated(rng, value[key])
    return value


def fuzzed_reply(rng: random.Random) -> Callable[[str], Reply | bytes]:
    def reply(path: str) -> Reply | bytes:
        roll = rng.random()
        if roll < 0.08:  # not HTTP
            return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        status = rng.choice([200] * 8 + [201, 204, 301, 400, 404, 422, 500, 503])
        headers = {"Location": "http://x.invalid/\x1b[2J"} if status == 301 else {}
        if roll < 0.2:  # bytes that are not JSON
            return status, bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))), headers
        body = VALID.get(path.split("?")[0], {})
        body = mutated(rng, body) if roll < 0.7 else random_value(rng)
        return status, json.dumps(body).encode(), headers

    return reply


def test_a_fuzzed_server_gets_one_line_for_every_answer(
    answering, smollm2_path: Path, capfd
) -> None:
    """500+ requests answered with random JSON shapes (valid answers with a subtree replaced, or
    anything), random bytes, and bytes that are not HTTP: every call returns typed values or raises
    one safe line; nothing is printed (no traceback, no "Exception ignored")."""
    rng = random.Random(55)
    answering(fuzzed_reply(rng))
    vocab = load_vocab(str(smollm2_path))
    endpoint = Endpoint(answering.url, model="m", retries=0, timeout_s=5)
    runner = LoopThread()
    client = CompletionClient(endpoint, runner=runner)
    generator = RemoteGenerator(ServerPool([endpoint]), vocab, 4096)
    verifier = RemoteVerifier(ServerPool([endpoint]), vocab, prm_format("judge"), top_logprobs=2)
    outcomes = {"answered": 0, "one line": 0}
    try:
        for i in range(520):
            try:
                _fuzz_call(i, client, runner, generator, verifier)
                outcomes["answered"] += 1
            except Exception as err:  # noqa: BLE001 - each must be one of ours, one safe line
                one_safe_line(err)
                outcomes["one line"] += 1
    finally:
        client.close()
        generator.close()
        verifier.close()
        runner.stop()
    assert Answering.served >= 500
    assert outcomes["answered"] > 20 and outcomes["one line"] > 200, outcomes
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == "", captured.err[-3000:]


def _fuzz_call(
    i: int,
    client: CompletionClient,
    runner: LoopThread,
    generator: RemoteGenerator,
    verifier: RemoteVerifier,
) -> None:
    """One call of the backend's that reads an answer: the model list (a client of its own, which
    asks it once), tokenize, a completion, a generator step or a verifier score."""
    kind = i % 5
    if kind == 0:
        asking = CompletionClient(replace(client.endpoint, model=None), runner=runner)
        try:
            assert isinstance(asking.model, str)
        finally:
            asking.close()
    elif kind == 1:
        served_tokens(client, PROBE)
    elif kind == 2:
        client.complete([{"prompt": [1, 2, 3], "max_tokens": 4}])
    elif kind == 3:
        seq = generator.new_seq()
        try:
            generator.step([BatchEntry(seq, [1, 2, 3])], [2], SamplingParams(seed=i))
        finally:
            generator.free(seq)
    else:
        verifier.score([ScoreRequest(f"r{i}", "What is 2 + 2?", ["2 + 2 = 4."], [0])])
