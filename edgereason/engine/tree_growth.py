"""After a forward pass: the sampled tokens extend their nodes (equal draws stay one node, different
ones split it), expansion draws become children, and a step that ends joins the verification queue
and may start its next step speculatively (design.md section 4)."""

from __future__ import annotations

import time
from collections import Counter

from edgereason.config import mix_seed
from edgereason.engine.counts import Counts, Tally
from edgereason.engine.events import NodeAdded, NodeExtended, StepFinished
from edgereason.engine.request import Request
from edgereason.engine.scheduler import PassRow
from edgereason.engine.step_context import StepContext
from edgereason.tree import Node, Status, has_boxed_answer


def speculate(ctx: StepContext, req: Request, node: Node) -> None:
    """A standard candidate that finished its step early starts its next step before selection
    (where ctx's policy speculates)."""
    policy = ctx.policy
    group = req.group_of(node)
    if (
        node.speculative
        or node.path_complete
        or group is None
        or group.steps_done()
        or node.children
    ):
        return
    if policy.async_expand:
        req.plan(
            node, [(None, req.config.width * min(node.potential, group.keep))], speculative=True
        )
    elif policy.speculative_extension:
        req.plan(node, [(None, 1)], speculative=True)


class TreeGrower:
    """Grows the search tree from a forward pass's draws: tokens onto nodes, children, ended
    steps."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    def postprocess(self, batch: list[PassRow], draws: list[list[int]]) -> Tally:
        """Apply a pass's draws; returns the rows and tokens counted for each request."""
        tally = Tally()
        for work, tokens in zip(batch, draws):
            req, node = work.request, work.node
            counts = tally.of(req)
            counts.forward_rows += 1 if work.draws else 0
            counts.dedup_saved_rows += max(0, work.draws - 1) if self.ctx.policy.dedup else 0
            if node is req.tree.root and req.prompt_fed < len(req.prompt_ids):
                req.prompt_fed += len(work.tokens)
            else:
                node.pending = None  # fed
            if work.expand:
                self._make_children(req, node, tokens, counts)
            elif tokens:
                self._decode(req, node, tokens, counts)
        return tally

    def _decode(self, req: Request, node: Node, tokens: list[int], counts: Counts) -> None:
        """`tokens`: node.potential draws from one distribution. Equal draws stay one node; if they
        differ the node splits into siblings of the same step prefix (deduplication), each
        continuing its own draw."""
        if len(tokens) == 1:  # most rows: one draw, no split
            node.potential = 1
            self._append(req, node, tokens[0], counts)
            return
        (first, first_n), *rest = Counter(tokens).items()
        twins = []
        for k, (token, count) in enumerate(rest, start=1):
            twin = req.tree.add_sibling_copy(
                node,
                potential=count,
                base=node.base,
                offset=node.offset,
                seed=mix_seed(node.seed, 1, len(node.tokens), k),
            )
            twin.seq = self.ctx.generator.fork(node.seq)
            req.join(twin, node.group)
            twins.append((twin, token))
            self.ctx.emit(
                NodeAdded(
                    req.id,
                    twin.id,
                    node.parent.id if node.parent else None,
                    twin.depth,
                    count,
                    twin.speculative,
                )
            )
        node.potential = first_n
        self._append(req, node, first, counts)
        for twin, token in twins:
            self._append(req, twin, token, counts)

    def _append(self, req: Request, node: Node, token: int, counts: Counts) -> None:
        cfg = req.config
        # a node of potential p drew p equal tokens: p logical candidates, as without deduplication
        counts.generated_tokens += node.potential
        if node.speculative:
            counts.spec_tokens += node.potential
        if token in self.ctx.generator.eos_ids:
            self._end_step(req, node, "eos")
            return
        piece = self.ctx.generator.token_piece(token)
        node.tokens.append(token)
        node.raw += piece
        node.pending = token
        # node.text decodes the whole step: only for a listener
        if self.ctx.emit.listener is not None:
            self.ctx.emit(NodeExtended(req.id, node.id, node.text, len(node.tokens)))
        if node.step_ended_by(piece) or len(node.tokens) >= cfg.max_step_tokens:
            self._end_step(req, node, "answer" if has_boxed_answer(node.text) else "step")
        elif node.offset + len(node.tokens) >= cfg.max_path_tokens:
            self._end_step(req, node, "length")
        elif node.base + len(node.tokens) + 1 >= self.ctx.generator.kv_capacity_tokens:
            self._end_step(req, node, "length")

    def _end_step(self, req: Request, node: Node, finish: str) -> None:
        if finish == "step" and node.depth >= req.config.max_steps:
            finish = "max_steps"
        if finish == "step" and node.offset + len(node.tokens) >= req.config.max_path_tokens:
            finish = "length"
        node.finish = finish
        node.finished_at = time.perf_counter()
        self.ctx.emit(StepFinished(req.id, node.id, finish))
        self.ctx.emit.status(req.id, node, Status.WAITING)
        if node.path_complete:
            node.waited = True
            if not node.speculative and not self.ctx.verification.keeps_kv(req, node):
                self.ctx.kv.free(node)
        # a speculative step is scored once its parent is selected, unless asynchronous expansion
        # scores it now
        if not node.speculative or self.ctx.policy.async_expand:
            self.ctx.verification.push(req, node)
        speculate(self.ctx, req, node)

    def _make_children(self, req: Request, parent: Node, draws: list[int], counts: Counts) -> None:
        """Turn the draws of one forward pass into children, group by group of the parent's plan."""
        plan, speculative = parent.plan or [], parent.plan_speculative
        req.cancel_plan(parent)
        if parent.finished_at is not None and not parent.waited:
            parent.waiting_s = time.perf_counter() - parent.finished_at
            parent.waited = True
        specs: list[tuple[int | None, int, int]] = []  # (group, token, potential)
        i = 0
        for group_id, n in plan:
            chunk = draws[i : i + n]
            i += n
            if self.ctx.policy.dedup:
                specs += [(group_id, tok, cnt) for tok, cnt in Counter(chunk).items()]
            else:
                specs += [(group_id, tok, 1) for tok in chunk]
        base = self.ctx.generator.seq_len(parent.seq)
        offset = parent.offset + len(parent.tokens)
        children = []
        for idx, (group_id, token, potential) in enumerate(specs):
            child = req.tree.add_child(
                parent,
                potential=potential,
                speculative=speculative,
                base=base,
                offset=offset,
                status=Status.SPECULATIVE if speculative else Status.GENERATING,
                seed=mix_seed(parent.seed, 2, idx),
            )
            req.join(child, group_id)
            # the last child takes the parent's sequence over; the others share its KV through forks
            child.seq = parent.seq if idx == len(specs) - 1 else self.ctx.generator.fork(parent.seq)
            children.append((child, token))
            added = NodeAdded(req.id, child.id, parent.id, child.depth, potential, speculative)
            self.ctx.emit(added)
        parent.seq = None
        if parent is req.tree.root:  # the prompt is in: the root carries on through its children
            self.ctx.emit.status(req.id, parent, Status.SELECTED)
        for child, token in children:
            self._append(req, child, token, counts)
