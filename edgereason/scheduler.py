"""Builds one generator batch per engine step from every runnable node of every running request.

Rules: standard work (prefill, decoding candidates, expansions of selected nodes) always goes first; speculative
work fills only the slots standard work leaves idle (at most `beams` entries per request in all); the batch never
holds more tokens than one forward pass takes nor more new KV than is free.
"""

from __future__ import annotations

from typing import NamedTuple

from edgereason.policy import Policy
from edgereason.protocols import Generator
from edgereason.request import Request
from edgereason.tree import Node, Status


class Work(NamedTuple):
    request: Request
    node: Node
    tokens: list[int]  # fed in this pass
    draws: int  # tokens sampled from the last position (0: prefill chunk only)
    expand: bool  # the draws become children (plan), else they extend the node

    @property
    def speculative(self) -> bool:
        return self.node.speculative or (self.expand and self.node.plan_speculative)


def _order_key(node: Node, policy: Policy) -> tuple:
    if policy.order == "fifo":
        return (node.id,)
    ids = []  # prefix order: the root-to-node id path, so children of one parent sit together
    cur: Node | None = node
    while cur is not None:
        ids.append(cur.id)
        cur = cur.parent
    return tuple(reversed(ids))


def _work_for(req: Request, node: Node, budget: int) -> Work | None:
    if node is req.tree.root and req.prompt_fed < len(req.prompt_ids):
        chunk = req.prompt_ids[req.prompt_fed: req.prompt_fed + budget]
        last = req.prompt_fed + len(chunk) == len(req.prompt_ids)
        draws = sum(n for _, n in node.plan) if last and node.plan else 0
        return Work(req, node, chunk, draws, expand=draws > 0)
    if node.plan and node.pending is not None:
        return Work(req, node, [node.pending], sum(n for _, n in node.plan), expand=True)
    if not node.step_done and node.pending is not None and node.seq is not None:
        return Work(req, node, [node.pending], node.potential, expand=False)
    return None


def schedule(requests: list[Request], generator: Generator, policy: Policy) -> list[Work]:
    budget = generator.max_batch_tokens
    slots_free = generator.free_seq_slots()
    kv_free = generator.kv_capacity_tokens - generator.kv_used_tokens
    batch: list[Work] = []
    for req in requests:
        if req.status != "running":
            continue
        candidates = [req.tree.root] if req.prompt_fed < len(req.prompt_ids) else []
        candidates += [n for n in req.tree.steps() if n.alive and n.status is not Status.PRUNED
                       and (n.plan or (not n.step_done and n.seq is not None))]
        standard, speculative = [], []
        for node in sorted(candidates, key=lambda n: _order_key(n, policy)):
            (speculative if (node.speculative or (node.plan and node.plan_speculative)) else standard).append(node)
        room = max(0, req.config.beams - len(standard))
        for node in standard + speculative[:room]:
            work = _work_for(req, node, budget)
            if work is None:
                continue
            forks = max(0, work.draws - 1)  # worst case: every draw becomes a sequence of its own
            if len(work.tokens) > budget or forks > slots_free or len(work.tokens) > kv_free:
                continue
            batch.append(work)
            budget -= len(work.tokens)
            slots_free -= forks
            kv_free -= len(work.tokens)
    return batch
