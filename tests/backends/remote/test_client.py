"""The HTTP client: retries on 5xx and connection errors, one clear line for 4xx and a dead server,
a deadline that holds against a server that never answers, and no task left running after an
error."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from remote_server import JSONHandler, LocalServer, free_port

from edgereason.backends.remote.client import CompletionClient, RemoteError
from edgereason.backends.remote.loop_thread import LoopThread
from edgereason.backends.remote_settings import Endpoint
from edgereason.errors import ConfigError


def loop_tasks(client: CompletionClient) -> int:
    """Tasks alive on the client's loop, besides the one counting them."""

    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    return asyncio.run_coroutine_threadsafe(count(), client._loop).result(5)


class Scripted(JSONHandler):
    """Answers POSTs with the statuses in `script`, in order, then 200 with a completion."""

    script: list[int] = []
    seen = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).seen += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status = type(self).script.pop(0) if type(self).script else 200
        body = (
            {"choices": [{"text": "ok", "finish_reason": "length"}]}
            if status == 200
            else {"error": {"message": f"scripted {status}"}}
        )
        self.answer(status, body)


@pytest.fixture()
def scripted() -> Iterator[str]:
    Scripted.seen = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_5xx_is_retried_then_answered(scripted: str) -> None:
    Scripted.script = [503, 502]
    client = CompletionClient(Endpoint(scripted, model="m", retries=3))
    try:
        answers = client.complete([{"prompt": "x", "max_tokens": 1}])
        assert answers[0].choices[0].text == "ok"
        assert client.stats.retries == 2 and Scripted.seen == 3
    finally:
        client.close()


def test_5xx_every_time_gives_up_with_the_servers_message(scripted: str) -> None:
    Scripted.script = [500] * 10
    client = CompletionClient(Endpoint(scripted, model="m", retries=1))
    try:
        with pytest.raises(RemoteError, match=r"HTTP 500: scripted 500\) after 2 tries"):
            client.complete([{"prompt": "x"}])
        assert Scripted.seen == 2
    finally:
        client.close()


def test_4xx_is_not_retried(scripted: str) -> None:
    Scripted.script = [404]
    client = CompletionClient(Endpoint(scripted, model="m", retries=3))
    try:
        with pytest.raises(
            RemoteError, match=r"refused the request \(HTTP 404\): scripted 404 .*--served-model"
        ):
            client.complete([{"prompt": "x"}])
        assert Scripted.seen == 1
    finally:
        client.close()


def test_a_server_that_refuses_token_id_prompts_is_told_which_server_takes_them(
    scripted: str,
) -> None:
    """llama-cpp-python's stock server answers a prompt of token ids with 422; its message names a
    type, not why."""
    Scripted.script = [422]
    client = CompletionClient(Endpoint(scripted, model="m", retries=3))
    try:
        with pytest.raises(
            RemoteError,
            match=r"\(HTTP 422\): scripted 422 \(prompts go as token ids; .* "
            r"python -m edgereason.backends.remote.llamacpp_server\)$",
        ):
            client.complete([{"prompt": [1, 2, 3]}])
    finally:
        client.close()


def test_a_server_that_is_down_is_one_line_and_fast() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(RemoteError) as err:
        CompletionClient(Endpoint(url, retries=1)).model  # noqa: B018 - the first request
    assert time.monotonic() - t0 < 10
    assert "cannot reach the server" in str(err.value) and "is it running?" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_silent_server_hits_the_deadline_and_leaves_no_task() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        client = CompletionClient(
            Endpoint(
                f"http://127.0.0.1:{silent.getsockname()[1]}", model="m", timeout_s=1, retries=1
            )
        )
        try:
            t0 = time.monotonic()
            with pytest.raises(RemoteError, match="no answer within 1s"):
                client.complete([{"prompt": "x"}] * 4)
            assert time.monotonic() - t0 < client.endpoint.deadline_s
            assert loop_tasks(client) == 0
        finally:
            client.close()
        assert not client._thread.is_alive()


def test_endpoint_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="http"):
        Endpoint("localhost:8080")
    with pytest.raises(ConfigError, match="--remote-concurrency"):
        Endpoint("http://127.0.0.1:1", concurrency=0)
    # NaN was taken: "did not answer within nans"; inf waits forever
    for timeout in (0.0, float("nan"), float("inf")):
        with pytest.raises(
            ConfigError, match="--remote-timeout must be a positive number of seconds"
        ):
            Endpoint("http://127.0.0.1:1", timeout_s=timeout)
    with pytest.raises(ConfigError, match="EDGEREASON_NO_SUCH_KEY"):
        Endpoint("http://127.0.0.1:1", api_key_env="EDGEREASON_NO_SUCH_KEY")
    assert Endpoint("http://h:1/v1/").root == "http://h:1"


@pytest.mark.slow
def test_a_prompt_longer_than_the_servers_context_is_one_clear_line(server: LocalServer) -> None:
    client = CompletionClient(Endpoint(server.url))
    try:
        with pytest.raises(RemoteError, match=r"HTTP 400") as err:
            client.complete([{"prompt": "one two three " * 3000, "max_tokens": 1}])
        assert "context" in str(err.value) and "\n" not in str(err.value)
        assert client.stats.retries == 0
    finally:
        client.close()


class Interrupted(Exception):
    """What a stop signal raises in the waiting thread (KeyboardInterrupt would end pytest
    itself)."""


def test_a_call_stopped_by_a_signal_returns_after_its_task_has_unwound() -> None:
    """A signal during a request cancelled only the caller's future, which returns at once, while
    the task was still unwinding; the loop was then closed under it ("Exception ignored ... Event
    loop is closed", "Task was destroyed but it is pending", 3 of 12 SIGTERMs of a served solve)."""
    runner = LoopThread()
    unwound = []

    async def slow_to_cancel() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.3)  # closing connections, awaiting the other requests of a round
            unwound.append(True)

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(Interrupted):
            runner.call(slow_to_cancel(), 10, "the server")
        assert unwound == [True]  # the task ended before the call did
    finally:
        signal.signal(signal.SIGALRM, previous)
        runner.stop()
    assert not runner.thread.is_alive() and runner.loop.is_closed()
