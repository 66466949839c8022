"""Several servers behind one search (`--base-url URL1,URL2`, backends/remote/pool.py): requests
spread over real llama-cpp-python servers, a path's continuation goes where its prefix is cached, a
server killed mid-search hands its requests to the other, bench reports the requests per server, and
a bad list is one line naming the server."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from remote_server import JSONHandler, LocalServer, free_port

from edgereason.backends.remote import Endpoint, Outages, open_generator, open_verifier
from edgereason.backends.remote.pool import AFFINITY_SLACK, choose_server
from edgereason.config import SamplingParams, SearchConfig
from edgereason.engine.events import NodeScored
from edgereason.engine.loop import Engine
from edgereason.engine.policy import parse_policy
from edgereason.engine.prompt import prompt_ids
from edgereason.engine.result import SearchResult
from edgereason.protocols import BatchEntry
from tests.backends.remote.test_cli_remote import one_line_error, run_cli

QUESTIONS = ["What is 12 * 7 - 5?", "What is 3 + 4 * 2?"]
SMALL = SearchConfig(beams=2, width=2, max_steps=2, max_step_tokens=32, max_path_tokens=100)
SEARCH = [
    *(
        "--beams",
        "2",
        "--width",
        "2",
        "--max-steps",
        "2",
        "--max-step-tokens",
        "32",
        "--max-tokens",
        "64",
    ),
    *("--remote-step-tokens", "32"),  # the server stops a step where the engine would
]


@pytest.fixture()
def start_server(smollm2_path: Path) -> Iterator[Callable[..., LocalServer]]:
    """Starts SmolLM2 servers with other flags for one test; stops them after it."""
    started: list[LocalServer] = []

    def start(**kwargs: object) -> LocalServer:
        started.append(LocalServer(smollm2_path, n_threads=1, **kwargs))  # type: ignore[arg-type]
        return started[-1]

    yield start
    for srv in started:
        srv.stop()


def search_stopping(
    model: Path, endpoints: list[Endpoint], stop: Callable[[], None], at_score: int
) -> tuple[list[SearchResult], list[int], tuple[list[int], list[int]]]:
    """QUESTIONS searched with both roles on `endpoints`, `stop()` called at the at_score-th scored
    node: the results, the requests of each role (generator, PRM) the second server had answered
    when stopped, and each role's answers by server at the end. One Outages for both roles, as a
    session shares it: one line for the server they both lose."""
    outages = Outages()
    gen = open_generator(model, endpoints, 2048, step_tokens=32, outages=outages)
    ver = open_verifier(model, "judge", endpoints, outages=outages)
    scored: list[NodeScored] = []
    killed_at: list[int] = []

    def stop_at_the_score(event: object) -> None:
        if isinstance(event, NodeScored):
            scored.append(event)
            if len(scored) == at_score:
                killed_at.extend([gen.client.answered[1], ver.client.answered[1]])
                stop()

    try:
        engine = Engine(gen, ver, parse_policy("baseline"), on_event=stop_at_the_score)
        for i, question in enumerate(QUESTIONS):
            engine.submit(question, SMALL, request_id=f"p{i}")
        results = engine.run_until_done(check=True)
        return results, killed_at, (gen.client.answered, ver.client.answered)
    finally:
        gen.close()
        ver.close()


def remote_cli(model: Path, urls: list[str], *args: str, question: str = "What is 1+1?"):
    return run_cli(
        "solve",
        question,
        "--model",
        str(model),
        "--backend",
        "remote",
        "--base-url",
        ",".join(urls),
        *args,
    )


def test_the_routing_rule() -> None:
    assert choose_server([0, 0], [0, 1], None) == 0  # a tie: the first listed
    assert choose_server([1, 0], [0, 1], None) == 1  # least in flight
    assert choose_server([AFFINITY_SLACK - 1, 0], [0, 1], 0) == 0  # home, a little busier
    assert choose_server([AFFINITY_SLACK, 0], [0, 1], 0) == 1  # home, much busier: moved
    assert choose_server([0, 5], [1], 0) == 1  # home gone


# ---------------------------------------------------------------- real servers
@pytest.mark.slow
def test_a_paths_continuation_goes_to_the_server_holding_its_prefix(
    server: LocalServer, second_server: LocalServer, smollm2_path: Path
) -> None:
    gen = open_generator(
        smollm2_path, [Endpoint(server.url), Endpoint(second_server.url)], 2048, step_tokens=16
    )
    try:
        sp = SamplingParams(seed=3)
        roots = [gen.new_seq(), gen.new_seq()]
        first = gen.step(
            [BatchEntry(r, prompt_ids(gen, q)) for r, q in zip(roots, QUESTIONS)], [1, 1], sp
        )
        assert gen.client.answered == [1, 1]  # one round of two requests: one to each server
        homes = [gen._seqs[r].home for r in roots]
        for root, token, home in zip(roots, first, homes):
            # its parent drew alone and keeps its completion: the kid asks anew, alone
            kid = gen.fork(root)
            gen.step([BatchEntry(kid, token)], [1], sp)
            # alone, least in flight would send every kid to the first server; each goes where its
            # prefix is
            assert gen._seqs[kid].home == home
        assert sorted(homes) == [0, 1] and gen.client.answered == [2, 2]
    finally:
        gen.close()


@pytest.mark.slow
def test_a_server_killed_mid_search_hands_its_requests_to_the_other(
    server: LocalServer, start_server, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own_server = start_server(n_ctx=2048)
    # the killed one refuses at once
    endpoints = [Endpoint(srv.url, retries=1) for srv in (server, own_server)]
    results, killed_at, answered = search_stopping(smollm2_path, endpoints, own_server.stop, 2)
    assert len(results) == len(QUESTIONS) and all(r.status == "done" for r in results), [
        r.reason for r in results
    ]
    for r in results:  # whole searches, as on one server
        assert sum(p.potential for p in r.paths) == SMALL.beams
        assert {n["status"] for n in r.tree} <= {"selected", "complete", "pruned"}
        assert all(n["score"] is None or 0 <= n["score"] <= 1 for n in r.tree)
    assert killed_at[0] > 0 and killed_at[1] > 0  # the killed server had served both roles
    # and served nothing after
    assert answered[0][1] == killed_at[0] and answered[1][1] == killed_at[1]
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"edgereason: the server at {re.escape(own_server.url)} stopped answering \(.+\); its "
        r"requests go to the "
        "other 1 server",
        lines[0],
    )


@pytest.mark.slow
def test_a_bench_over_two_servers_uses_both_and_reports_each(
    server: LocalServer, second_server: LocalServer, smollm2_path: Path, tmp_path: Path
) -> None:
    data = tmp_path / "two.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "problem": q, "answer": "0"}) + "\n"
            for i, q in enumerate(QUESTIONS)
        )
    )
    urls = [server.url, second_server.url]
    proc = run_cli(
        "bench",
        "--dataset",
        str(data),
        "--out",
        str(tmp_path / "out"),
        "--no-plots",
        "--policies",
        "baseline",
        "--model",
        str(smollm2_path),
        "--backend",
        "remote",
        "--base-url",
        ",".join(urls),
        *SEARCH,
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "out" / "results.json").read_text())["runs"][0]
    counts = run["requests_per_server"]
    assert sorted(counts) == sorted(urls)
    assert all(c["generator"] > 0 and c["prm"] > 0 for c in counts.values()), counts
    line = next(line for line in proc.stdout.splitlines() if line.startswith("requests per server"))
    for url, c in counts.items():
        assert f"{url} {c['generator']} generator + {c['prm']} prm" in line


# ----------------------------------------------------------- a bad list: one line naming the server
@pytest.mark.slow
def test_a_list_with_a_server_that_is_down_names_it(
    server: LocalServer, smollm2_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    proc = remote_cli(smollm2_path, [server.url, dead], "--remote-retries", "0")
    one_line_error(proc, 1, f"cannot reach the server at {dead}")
    assert "is it running? (or leave it out of --base-url)" in proc.stderr


@pytest.mark.slow
def test_servers_of_different_models_are_named(
    server: LocalServer, start_server, smollm2_path: Path
) -> None:
    other = start_server(extra=["--model_alias", "another-model"])
    proc = remote_cli(smollm2_path, [server.url, other.url])
    one_line_error(proc, 2, f"the servers at {server.url} and {other.url} serve different models")
    assert (
        "'another-model'); list servers of one model in --base-url (or pass --served-model"
        in proc.stderr
    )


class OtherTokenizer(JSONHandler):
    """A server that lists the model name `served` but tokenizes as another model does
    (llama-cpp-python's /extras/tokenize)."""

    served = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.answer(200, {"object": "list", "data": [{"id": self.served, "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer(200, {"tokens": [7, 8, 9]}) if self.path == "/extras/tokenize" else self.answer(
            404, {}
        )


@pytest.mark.slow
def test_servers_of_one_name_but_different_tokenizers_are_named(
    server: LocalServer, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the name llama-cpp-python's server lists
    monkeypatch.setattr(OtherTokenizer, "served", str(smollm2_path))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), OtherTokenizer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    other = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        proc = remote_cli(smollm2_path, [server.url, other])
    finally:
        httpd.shutdown()
        httpd.server_close()
    one_line_error(
        proc, 2, f"the servers at {server.url} and {other} serve models of different tokenizers"
    )


@pytest.mark.slow
def test_a_prm_server_without_logprobs_is_named(
    server: LocalServer, start_server, smollm2_path: Path
) -> None:
    bare = start_server(extra=["--logits_all", "false"])
    proc = remote_cli(smollm2_path, [server.url, bare.url], "--remote-retries", "0")
    one_line_error(proc, 1, f"the PRM server at {bare.url} gives no token logprobs")
    assert "--logits_all true" in proc.stderr and "leave it out of --base-url" in proc.stderr


@pytest.mark.slow
def test_a_server_whose_context_is_shorter_than_the_prompt_is_named(
    server: LocalServer, start_server, smollm2_path: Path
) -> None:
    short = start_server(n_ctx=256)  # listed first: the first request goes to it
    proc = remote_cli(
        smollm2_path, [short.url, server.url], *SEARCH, question="What is 1 + 1? " * 60
    )
    one_line_error(proc, 1, f"the server at {short.url} refused the request (HTTP 400)")
    assert "start that server with a longer context" in proc.stderr
