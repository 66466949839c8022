"""The verification queue's flush rules and what a flush sends, on hand-built trees and the fake
verifier."""

from __future__ import annotations

import pytest

from edgereason.config import SearchConfig
from edgereason.engine.events import Emitter, NodeScored, NodeStatus
from edgereason.engine.request import Request
from edgereason.engine.stats import EngineStats
from edgereason.engine.verification import FlushFailed, VerifyQueue, VerifyStage
from edgereason.errors import OutOfMemoryError
from edgereason.protocols import ScoreRequest, VerifierStats
from edgereason.tree import Node, Status
from tests.fakes import FakeVerifier


def _request(strategy: str = "beam", members: int = 2) -> tuple[Request, list[Node]]:
    req = Request(
        "r",
        "q",
        SearchConfig(strategy=strategy, beams=8, width=1 if strategy == "best-of-n" else 2),
        [2] * 4,
    )
    group = req.new_group(1, 2)
    nodes = []
    for _ in range(members):
        node = req.tree.add_child(req.tree.root)
        node.tokens, node.raw = [5] * 20, bytearray(b"x" * 20)
        req.join(node, group.id)
        nodes.append(node)
    return req, nodes


def _finish(node: Node, how: str = "step") -> None:
    node.finish, node.status = how, Status.WAITING


def test_eager_flushes_whatever_is_queued() -> None:
    req, (a, _) = _request()
    q = VerifyQueue("eager")
    assert not q.should_flush(generator_idle=False)
    _finish(a)
    q.push(req, a)
    q.push(req, a)  # a node is queued once
    assert len(q.items) == 1 and q.should_flush(generator_idle=False)


def test_sync_waits_for_the_sibling_group_or_an_idle_generator() -> None:
    req, (a, b) = _request()
    q = VerifyQueue("sync")
    _finish(a)
    q.push(req, a)
    assert not q.should_flush(generator_idle=False)  # b still decodes
    assert q.should_flush(generator_idle=True)
    _finish(b)
    q.push(req, b)
    assert q.should_flush(generator_idle=False)


def test_lazy_flushes_at_the_token_threshold_or_after_max_deferrals() -> None:
    req, nodes = _request(members=5)  # the last one keeps decoding: the group is never complete
    q = VerifyQueue("lazy", threshold_tokens=2 * (20 + 12), max_defer=2)
    _finish(nodes[0])
    q.push(req, nodes[0])
    assert not q.should_flush(False)  # deferred once
    assert not q.should_flush(False)  # nothing new arrived: no deferral counted
    _finish(nodes[1])
    q.push(req, nodes[1])
    assert q.should_flush(False)  # two queued steps of 20 tokens reach the threshold
    q.take()
    q.threshold_tokens = 10_000
    for n in nodes[2:4]:
        _finish(n)
        q.push(req, n)
        assert not q.should_flush(False)
    assert [p.deferrals for p in q.items] == [2, 1]
    assert q.should_flush(False)  # the oldest waited max_defer times


def test_pruned_steps_leave_the_queue() -> None:
    req, (a, b) = _request()
    q = VerifyQueue("eager")
    _finish(a)
    q.push(req, a)
    a.status = Status.PRUNED
    assert not q.should_flush(generator_idle=True) and q.items == []


def _verification(verifier, events: list) -> VerifyStage:
    return VerifyStage(
        verifier,
        VerifyQueue("eager"),
        lookahead=False,
        emit=Emitter(events.append),
        stats=EngineStats(),
    )


def test_a_flush_scores_the_queue_says_so_and_records_the_call() -> None:
    events: list = []
    v = _verification(FakeVerifier(), events)
    req, (a, b) = _request()
    assert v.flush(generator_idle=True) is None  # nothing queued: the PRM did not run
    for n in (a, b):
        _finish(n)
        v.push(req, n)
    counted = v.flush(generator_idle=False)
    assert counted is not None  # the PRM ran
    assert a.score is not None and b.score is not None and a.status is Status.VERIFIED
    assert v.stats.prm_batches == [2]
    assert counted.of(req).prm_calls == 1 and counted.of(req).prm_requests == 2
    assert [type(e) for e in events] == [NodeScored, NodeStatus] * 2
    assert req.prm_held == {req.key(a), req.key(b)}
    a.status = Status.PRUNED
    v.release_dead(req)
    assert req.prm_held == {req.key(b)}


def test_best_of_n_scores_whole_solutions_only() -> None:
    req, (first,) = _request("best-of-n", members=1)
    second = req.tree.add_child(first)
    second.tokens, second.raw = [6], bytearray(b"y")
    req.join(second, first.group)
    sent: list[ScoreRequest] = []
    verifier = FakeVerifier()
    score = verifier.score
    verifier.score = lambda reqs: sent.extend(reqs) or score(reqs)
    v = _verification(verifier, [])
    _finish(first)
    v.push(req, first)
    assert not v.queue.items  # a step that does not end the solution is not scored
    _finish(second, "answer")
    v.push(req, second)
    assert v.flush(generator_idle=True)
    assert (
        [list(r.need) for r in sent] == [[0, 1]]
        and first.score is not None
        and second.score is not None
    )


def test_an_out_of_memory_prm_fails_the_requests_it_was_scoring() -> None:
    class Full(FakeVerifier):
        def score(self, requests):
            raise OutOfMemoryError("no room")

    v = _verification(Full(), [])
    req, (a, _) = _request()
    _finish(a)
    v.push(req, a)
    with pytest.raises(FlushFailed) as failed:
        v.flush(generator_idle=True)
    assert failed.value.requests == [req] and "no room" in str(failed.value.error)
    assert isinstance(Full().stats, VerifierStats)
