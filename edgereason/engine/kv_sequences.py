"""The generator's KV sequences: which node owns which sequence, making a batch fit (evict idle
sequences, defer the batch's tail), rebuilding evicted nodes, freeing sequences, and the check that
the ownership is exact.

Eviction order: speculative sequences first, then least recently run. An evicted node is rebuilt
when it runs again by forking the live relative with the longest shared prefix and recomputing the
rest (docs/engine.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from edgereason.engine.counts import Tally
from edgereason.engine.request import Request
from edgereason.engine.scheduler import PassRow
from edgereason.errors import OutOfMemoryError
from edgereason.protocols import Generator
from edgereason.tree import Node


class Fit(NamedTuple):
    """A batch made to fit: the work that runs, the requests that cannot fit at all, and the
    evictions and recomputed tokens counted for each request."""

    batch: list[PassRow]
    failed: list[tuple[Request, OutOfMemoryError]]
    counts: Tally


class KVSequences:
    """The generator's sequences and the nodes that own them: fit a batch, evict, restore, free,
    check."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator

    @property
    def free_tokens(self) -> int:
        return self.generator.kv_capacity_tokens - self.generator.kv_used_tokens

    def fit(self, batch: list[PassRow], running: list[Request], step: int) -> Fit:
        """The part of `batch` that fits, with evicted nodes rebuilt, and the requests that cannot
        fit at all (one path longer than the whole room). `step` stamps the nodes that run
        (least-recently-used order)."""
        batch, tally = list(batch), Tally()
        need = sum(w.cost for w in batch)
        victims = self._eviction_order(batch, running) if need > self.free_tokens else []
        while need > self.free_tokens:
            if victims:
                req, node = victims.pop()
                self._evict(node)
                tally.of(req).evictions += 1
            elif len(batch) > 1:
                dropped = batch.pop()
                need -= dropped.cost
                if dropped.node.seq is not None and dropped.node.depth > 0:
                    victims.insert(0, (dropped.request, dropped.node))
            else:
                work = batch.pop()
                error = OutOfMemoryError(
                    f"one search path needs {work.cost} KV tokens but the generator has "
                    f"{self.generator.kv_capacity_tokens}; raise --kv-budget (or --kv-tokens) "
                    "or lower --max-tokens"
                )
                return Fit([], [(work.request, error)], tally)
        for w in batch:
            w.node.last_run = step
        return Fit([self._restore(w, tally) if w.restore else w for w in batch], [], tally)

    def _eviction_order(
        self, batch: list[PassRow], running: list[Request]
    ) -> list[tuple[Request, Node]]:
        """Resident nodes outside the batch, the best victim last (pop() takes it)."""
        in_batch = {id(w.node) for w in batch}
        victims = sorted(
            (
                (r, n)
                for r in running
                for n in r.tree.steps()
                if n.seq is not None and id(n) not in in_batch
            ),
            key=lambda rn: (not rn[1].speculative, rn[1].last_run, rn[1].id),
        )
        victims.reverse()
        return victims

    def _evict(self, node: Node) -> None:
        self.free(node)
        node.evicted = True

    def _restore(self, work: PassRow, tally: Tally) -> PassRow:
        """Rebuild an evicted node's KV: fork the relative that shares the longest prefix, recompute
        the rest."""
        req, node = work.request, work.node
        stream = list(req.prompt_ids)
        for a in node.path():
            stream += a.tokens
        # an empty node re-feeds its parent's last token
        fed = len(node.tokens) - 1 if node.tokens else -1
        target = node.base + fed
        donor, share = None, 0
        ancestor: Node | None = node.parent
        while ancestor is not None and donor is None:
            end = len(req.prompt_ids) + (
                ancestor.offset + len(ancestor.tokens) if ancestor.depth else 0
            )
            for x in ancestor.subtree():
                if x is not node and x.seq is not None and self.generator.seq_len(x.seq) >= end:
                    donor, share = x.seq, min(end, target)
                    break
            ancestor = ancestor.parent
        if donor is not None:
            node.seq = self.generator.fork(donor)
            self.generator.truncate(node.seq, share)
        else:
            node.seq = self.generator.new_seq()
        rebuilt = stream[share:target]
        node.evicted = False
        tally.of(req).recomputed_tokens += len(rebuilt)
        return work._replace(tokens=rebuilt + work.tokens, restore=0)

    def free(self, node: Node) -> None:
        if node.seq is not None:
            self.generator.free(node.seq)
            node.seq = None

    def check(self, nodes: Iterable[Node]) -> None:
        """Exact ownership (design.md section 4): every live sequence belongs to exactly one live
        node of a running request, and its KV length is that node's path; raises AssertionError on
        the first violation."""
        owners: dict[int, Node] = {}
        for n in nodes:
            if n.seq is None:
                continue
            assert n.alive, f"pruned node {n.id} still holds sequence {n.seq}"
            assert n.seq not in owners, (
                f"sequence {n.seq} belongs to nodes {owners[n.seq].id} and {n.id}"
            )
            owners[n.seq] = n
            if n.depth > 0:
                fed = len(n.tokens) - (1 if n.pending is not None and n.tokens else 0)
                if n.tokens or n.pending is None:
                    assert self.generator.seq_len(n.seq) == n.base + fed, (
                        f"node {n.id}: KV length drifted"
                    )
        live = self.generator.live_seqs()
        assert live == len(owners), f"{live} live sequences, {len(owners)} owned by nodes"
        assert self.generator.kv_used_tokens <= self.generator.kv_capacity_tokens
        self.generator.check_integrity()
