"""Verification: the PRM request queue, when to flush it (design.md section 4, lazy verification),
the score requests a flush sends, and the release of PRM paths no live node can extend.

Flush rules:
- eager (asynchronous policies without lazy verification): flush whatever is queued after every
  engine step.
- synchronous (baseline, fasttts): flush when a sibling group has finished its step, or when the
  generator idles.
- lazy: flush when queued tokens reach the threshold, when a sibling group is complete, when a
  request was deferred more than `max_defer` times (a deferral: another finished step arrived and
  the queue still waited), or when the generator would otherwise idle."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from edgereason.engine.counts import Tally
from edgereason.engine.events import Emitter, NodeScored
from edgereason.engine.request import Request
from edgereason.engine.stats import EngineStats
from edgereason.errors import OutOfMemoryError
from edgereason.protocols import GeneratorPath, ScoreRequest, Verifier
from edgereason.tree import Node, Status

# A step's PRM cost is its tokens plus the turn markup around it (user/assistant headers, the answer
# token).
TURN_OVERHEAD_TOKENS = 12


@dataclass
class Pending:
    request: Request
    node: Node
    deferrals: int = 0


@dataclass
class VerifyQueue:
    """Finished steps waiting for the PRM, and the flush rules (module docstring)."""

    mode: str  # eager | sync | lazy
    threshold_tokens: int = 512
    max_defer: int = 6
    items: list[Pending] = field(default_factory=list)
    _arrived: bool = False  # a step finished since the last flush decision

    def push(self, request: Request, node: Node) -> None:
        if not any(p.node is node for p in self.items):
            self.items.append(Pending(request, node))
            self._arrived = True

    def drop_dead(self) -> None:
        self.items = [p for p in self.items if p.node.alive and p.request.status == "running"]

    def queued_tokens(self) -> int:
        return sum(len(p.node.tokens) + TURN_OVERHEAD_TOKENS for p in self.items)

    def should_flush(self, generator_idle: bool) -> bool:
        self.drop_dead()
        if not self.items:
            return False
        if generator_idle or self.mode == "eager":
            return True
        if self._group_complete():
            return True
        if self.mode == "lazy":
            if self.queued_tokens() >= self.threshold_tokens:
                return True
            if any(p.deferrals >= self.max_defer for p in self.items):
                return True
            # a flush opportunity passed over: everything waiting was deferred once more
            if self._arrived:
                for p in self.items:
                    p.deferrals += 1
                self._arrived = False
        return False

    def _group_complete(self) -> bool:
        for p in self.items:
            group = p.request.group_of(p.node)
            if group is not None and not group.selected and group.steps_done():
                return True
        return False

    def take(self) -> list[Pending]:
        items, self.items = self.items, []
        return items


def generator_path(req: Request, path: list[Node]) -> GeneratorPath:
    """The path's tokens and step ends, and a generator sequence that holds it: its last node's, or
    once that node went on into children (speculation), a live descendant's, whose KV starts with
    the same tokens."""
    tokens, ends = list(req.prompt_ids), []
    for n in path:
        tokens += n.tokens
        ends.append(len(tokens))
    seq, stack = None, [path[-1]]
    while stack and seq is None:
        n = stack.pop()
        seq = n.seq
        stack.extend(c for c in n.children if c.alive)
    return GeneratorPath(seq, tokens, len(req.prompt_ids), ends)


class FlushFailed(Exception):
    """The PRM ran out of memory: these requests cannot be scored (counts: what came before)."""

    def __init__(self, requests: list[Request], error: OutOfMemoryError, counts: Tally) -> None:
        super().__init__(str(error))
        self.requests, self.error, self.counts = requests, error, counts


class VerifyStage:
    """The engine's verification stage (the Verifier is the PRM model it calls): owns the queue and
    the PRM paths held for running requests (`Request.prm_held`)."""

    def __init__(
        self,
        verifier: Verifier,
        queue: VerifyQueue,
        lookahead: bool,
        emit: Emitter,
        stats: EngineStats,
    ) -> None:
        self.verifier, self.queue, self.lookahead, self.emit, self.stats = (
            verifier,
            queue,
            lookahead,
            emit,
            stats,
        )
        self.reads_generator = bool(getattr(verifier, "reads_generator", False))

    def keeps_kv(self, req: Request, node: Node) -> bool:
        """A finished path keeps its generator KV where the verifier reads the generator's rows
        (freeing it would make its score a prefill of the whole path); the KV goes when the path
        completes or is pruned, or is evicted under pressure like any other."""
        return self.reads_generator and node.score is None and req.strategy.scores_step(node)

    def push(self, req: Request, node: Node) -> None:
        """A finished step joins the queue if its strategy scores it."""
        if req.strategy.scores_step(node):
            self.queue.push(req, node)

    def flush(self, generator_idle: bool) -> Tally | None:
        """Score the queue if its rules say so: the PRM calls, requests, tokens and time counted
        for each request, or None when the PRM did not run. Raises FlushFailed on out-of-memory."""
        if not self.queue.should_flush(generator_idle):
            return None
        items, tally = self.queue.take(), Tally()
        try:
            return tally if self._score(items, tally) else None
        except OutOfMemoryError as e:
            reqs = list({id(p.request): p.request for p in items}.values())
            raise FlushFailed(reqs, e, tally) from e

    def _score(self, items: list[Pending], tally: Tally) -> bool:
        # requests in order of arrival, each one's steps together
        by_req: dict[int, list[Pending]] = {}
        for p in items:
            if p.node.alive and p.node.score is None and p.request.status == "running":
                by_req.setdefault(id(p.request), []).append(p)
        pending = [p for ps in by_req.values() for p in ps]
        calls = [self._score_request(p.request, p.node, tally) for p in pending]
        if not calls:
            return False
        reqs = [ps[0].request for ps in by_req.values()]
        rebuilt = self.verifier.stats.rebuilt_tokens
        t0 = time.perf_counter()
        results = self.verifier.score([c[2] for c in calls])
        dt = time.perf_counter() - t0
        self.stats.prm_call(len(calls), dt, self.verifier.stats.rebuilt_tokens - rebuilt)
        for req in reqs:
            tally.of(req).prm_calls += 1
            tally.of(req).prm_time_s += dt
        for (req, nodes, sreq), res in zip(calls, results):
            tally.of(req).prm_tokens += res.new_tokens
            tally.of(req).prm_requests += 1
            for node, score in zip(nodes, res.scores):
                node.score = score
                self.emit(NodeScored(req.id, node.id, score))
                if node.status is Status.WAITING:
                    self.emit.status(req.id, node, Status.VERIFIED)
            for node in nodes:
                node.prm_key = sreq.key
                req.prm_keyed[node.id] = node
            req.prm_held.add(sreq.key)
        return True

    def _score_request(
        self,
        req: Request,
        node: Node,
        tally: Tally,
    ) -> tuple[Request, list[Node], ScoreRequest]:
        """The PRM request for one finished step: the strategy may widen it to the path (best-of-N
        scores whole solutions); with lookahead a finished speculative child is scored in the same
        request."""
        path = node.path()
        nodes = req.strategy.scored_nodes(node) or [node]
        if len(nodes) == 1 and self.lookahead:
            ahead = [
                c for c in node.children if c.alive and c.step_done and c.score is None and c.tokens
            ]
            if ahead:
                nodes = [node, ahead[0]]
                path = ahead[0].path()
                tally.of(req).lookahead_scores += 1
        parent = node.parent if node.parent is not None and node.parent.depth > 0 else None
        # a first step shares the question's head, held under the root's key
        prefix_key = parent.prm_key if parent is not None else req.key(req.tree.root)
        return (
            req,
            nodes,
            ScoreRequest(
                key=req.key(nodes[-1]),
                question=req.question,
                steps=[n.text for n in path],
                need=[n.depth - 1 for n in nodes],
                prefix_key=prefix_key,
                prefix_steps=parent.depth if parent is not None else 0,
                generator_path=generator_path(req, path) if self.reads_generator else None,
            ),
        )

    def release_dead(self, req: Request) -> None:
        """Free the PRM paths no live node can extend any more. On a unified KV cache every row of a
        forward pass attends over all cells in use, so dead paths would slow every later PRM call,
        not only take memory."""
        live = set()
        # the nodes given a key, not the whole tree: one that lost its key, died or completed
        # never needs one again (a node is scored once)
        for n in list(req.prm_keyed.values()):
            if n.prm_key and n.alive and n.status is not Status.COMPLETE:
                live.add(n.prm_key)
            else:
                del req.prm_keyed[n.id]
        for key in req.prm_held - live:
            self.verifier.release(key)
        req.prm_held &= live
        req.prm_stale = False

    def forget(self, req: Request) -> None:
        """A finished request: drop its queued steps and every PRM path held for it."""
        self.verifier.release(f"{req.id}/")
        req.prm_held.clear()
        self.queue.items = [p for p in self.queue.items if p.request is not req]

    def check(self, running: list[Request]) -> None:
        """Only running requests hold PRM paths or queued steps; the verifier's own accounting
        agrees."""
        ids = {id(r) for r in running}
        assert all(id(p.request) in ids for p in self.queue.items), (
            "a finished request still has queued steps"
        )
        self.verifier.check_integrity()
