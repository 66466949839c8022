"""Builds one generator batch per engine step from every runnable node of every running request.

Rules: standard work (prefill, decoding candidates, expansions of selected nodes) always goes first;
speculative work fills only the slots standard work leaves idle (at most `beams` entries per request
in all); the batch never holds more tokens than one forward pass takes. Making it fit the
generator's KV is `kv_sequences.KVSequences.fit`'s job: it evicts or trims.

Sequences: a running request was admitted with a sequence set aside per beam (`can_admit`), and
forks from those or from the spare slots no request has set aside, never from another request's: one
that took them would keep them, and two requests each short of theirs would wait on each other for
good.

Order: `prefix` puts sequences that share a prefix next to each other (request, then the
root-to-node path), so when memory is short the batch keeps whole families whose shared KV is
resident; `fifo` is first-come order."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.engine.request import Request
from edgereason.errors import ConfigError
from edgereason.protocols import Generator
from edgereason.tree import Node


class PassRow(NamedTuple):
    """One row of the next forward pass: what a node feeds and draws in it."""

    request: Request
    node: Node
    # fed in this pass (a restored node's rebuilt suffix is prepended by the engine)
    tokens: list[int]
    draws: int  # tokens sampled from the last position (0: prefill chunk only)
    expand: bool  # the draws become children (plan), else they extend the node
    restore: int = 0  # upper bound on tokens to recompute first: the node's KV was evicted

    @property
    def cost(self) -> int:
        return len(self.tokens) + self.restore


def order_key(req_index: int, node: Node, policy: Policy) -> tuple:
    if policy.order == "fifo":
        return (node.created_at, node.id)
    return (req_index, node.lineage)  # orders as (req_index, *lineage): tuples compare item by item


def is_speculative(node: Node) -> bool:
    return node.speculative or bool(node.plan and node.plan_speculative)


def _row_for(req: Request, node: Node, budget: int) -> PassRow | None:
    if node is req.tree.root and req.prompt_fed < len(req.prompt_ids):
        chunk = req.prompt_ids[req.prompt_fed : req.prompt_fed + budget]
        last = req.prompt_fed + len(chunk) == len(req.prompt_ids)
        draws = sum(n for _, n in node.plan) if last and node.plan else 0
        return PassRow(req, node, chunk, draws, expand=draws > 0)
    if node.pending is None or (node.seq is None and not node.evicted):
        return None
    restore = len(req.prompt_ids) + node.offset + len(node.tokens) if node.seq is None else 0
    if node.plan:
        return PassRow(req, node, [node.pending], sum(n for _, n in node.plan), True, restore)
    if not node.step_done:
        return PassRow(req, node, [node.pending], node.potential, False, restore)
    return None


def runnable(req: Request) -> list[Node]:
    """The root while its prompt is fed, and the live step nodes with draws to make: read from the
    tree's frontier, which loses the nodes that can no longer run (pruned, or their step done and
    nothing planned; only a plan brings such a node back, and it puts it back in)."""
    nodes = [req.tree.root] if req.prompt_fed < len(req.prompt_ids) else []
    frontier = req.tree.frontier
    for node in list(frontier.values()):
        if node.alive and (node.plan or not node.step_done):
            nodes.append(node)
        else:
            del frontier[node.id]
    return nodes


def unclaimed_seqs(running: list[Request]) -> dict[str, int]:
    """Request id -> the sequences set aside for it that it does not hold now."""
    return {r.id: r.unclaimed_seqs() for r in running}


def spare_seq_slots(generator: Generator, unclaimed: dict[str, int]) -> int:
    """Free sequence slots that no running request has set aside."""
    return generator.free_seq_slots() - sum(unclaimed.values())


def can_admit(request: Request, running: list[Request], generator: Generator) -> bool:
    """Whether a sequence per beam of `request` can be set aside beside the running requests'
    own."""
    return request.config.beams <= spare_seq_slots(generator, unclaimed_seqs(running))


def check_beams(generator: Generator, config: SearchConfig) -> None:
    """ConfigError for more beams than the generator runs sequences at once (one a beam, llama.cpp's
    at most 256): such a search ran out of sequences at its first branch and failed with advice to
    raise the KV memory."""
    slots = generator.free_seq_slots() + generator.live_seqs()
    if config.beams > slots:
        raise ConfigError(
            f"--beams {config.beams} is more than the generator {generator.name} runs at once: "
            f"{slots} sequences, one a beam; pick --beams {slots} or fewer"
        )


def schedule(requests: list[Request], generator: Generator, policy: Policy) -> list[PassRow]:
    budget = generator.max_batch_tokens
    running = [r for r in requests if r.status == "running"]
    # one walk of each tree a pass: this runs before every forward pass
    own = unclaimed_seqs(running)
    spare = spare_seq_slots(generator, own)
    pool = sorted(
        (
            (order_key(i, n, policy), r, n, is_speculative(n))
            for i, r in enumerate(running)
            for n in runnable(r)
        ),
        key=lambda t: t[0],
    )
    standard = Counter(r.id for _, r, _, spec in pool if not spec)
    spec_room = {
        r.id: max(0, int(policy.spec_slots * r.config.beams) - standard[r.id]) for r in running
    }
    batch: list[PassRow] = []
    # standard first, each part in order
    for _, req, node, spec in [t for t in pool if not t[3]] + [t for t in pool if t[3]]:
        if spec:
            if spec_room[req.id] <= 0:
                continue
            spec_room[req.id] -= 1
        work = _row_for(req, node, budget)
        if work is None:
            continue
        # worst case: a sequence per draw
        forks = max(0, work.draws - 1) + (1 if work.restore else 0)
        if work.cost > budget or forks > own[req.id] + spare:
            continue
        batch.append(work)
        budget -= work.cost
        spare -= max(0, forks - own[req.id])
        own[req.id] = max(0, own[req.id] - forks)
    return batch
