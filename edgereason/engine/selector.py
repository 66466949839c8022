"""Selection and pruning with their effects on the tree (the pure ranking rules are in
selection.py): select ready groups, early pruning (rank and perfect-score rules), expansion of the
selected nodes (reusing speculative children), completion of finished paths, and pruning a
subtree."""

from __future__ import annotations

import time

import numpy as np

from edgereason.config import mix_seed
from edgereason.engine import ranking
from edgereason.engine.counts import Counts
from edgereason.engine.events import NodeAdded, NodeExtended, NodeSelected
from edgereason.engine.request import Group, Request
from edgereason.engine.step_context import StepContext
from edgereason.engine.tree_growth import speculate
from edgereason.tree import Node, Status


class Selector:
    """Each call returns what it counted for the request (pruned nodes, speculative tokens)."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    def select_ready(self, req: Request) -> Counts:
        counts = Counts()
        # ready() holds only where a group has live members, as open_groups() would filter
        for group in req.unselected_groups():
            if req.status == "running" and group.ready():
                chosen = ranking.choose(group, req.config.aggregation, req.config.select)
                counts += self._select(req, group, chosen)
        for group in req.unselected_groups():
            if group.members and not group.live_members():
                group.selected = True  # everything in it was pruned
        return counts

    def early_prune(self, req: Request) -> Counts:
        p, counts = self.ctx.policy, Counts()
        if not (p.early_prune_rank or p.early_prune_perfect) or not req.strategy.early_prune:
            return counts
        for group in req.open_groups():
            if req.status != "running":
                return counts
            if p.early_prune_perfect:
                chosen = ranking.perfect_set(
                    group, req.config.aggregation, p.perfect_score, req.config.select
                )
                if chosen is not None:
                    kept = {id(n) for n, _ in chosen}
                    out = [m for m in group.live_members() if id(m) not in kept]
                    counts.pruned_perfect += len(out)
                    counts += self._select(req, group, chosen, rule="perfect")
                    continue
            if p.early_prune_rank:
                for node in ranking.rank_prunable(group, req.config.aggregation, req.config.select):
                    counts.pruned_rank += 1
                    counts += self.prune(req, node, "rank")
        return counts

    def _select(
        self,
        req: Request,
        group: Group,
        chosen: list[tuple[Node, int]],
        rule: str = "selection",
    ) -> Counts:
        counts = Counts()
        group.selected = True
        group.kept = sum(t for _, t in chosen)
        req.common_prefix.append(
            ranking.common_prefix_share([m for m in group.live_members() if m.step_done])
        )
        kept = {id(n) for n, _ in chosen}
        for m in group.live_members():
            if m.path_complete and m.score is not None and id(m) not in kept:
                self.complete(req, m)
        finished_subtree = False
        for node, times in chosen:
            node.times_selected = times
            self.ctx.emit(NodeSelected(req.id, node.id, times))
            if node.path_complete:
                self.complete(req, node)
                finished_subtree = True
        for m in group.live_members():
            if id(m) not in kept and m.status is not Status.COMPLETE:
                counts += self.prune(req, m, rule)
        if not req.strategy.carries_on(req.completed_logical(), req.config.beams, finished_subtree):
            for node, _ in chosen:
                if node.status is not Status.COMPLETE:
                    counts += self.prune(req, node, "done")
            return counts
        if chosen:
            nxt = req.new_group(group.keep, group.width)
            for node, times in chosen:
                if not node.path_complete:
                    counts += self._expand(req, node, times, nxt)
        # every child of these parents was scored: their PRM prefixes are done
        for m in group.members:
            if m.parent is not None:
                m.parent.prm_key = None
        req.prm_stale = True
        return counts

    def complete(self, req: Request, node: Node) -> None:
        if node.status is not Status.COMPLETE:
            self.ctx.emit.status(req.id, node, Status.COMPLETE)
            req.prm_stale = True
            self.ctx.kv.free(node)
            req.completed.append(node)

    def _expand(self, req: Request, node: Node, times: int, group: Group) -> Counts:
        """A node selected `times` times continues as `times * width` logical candidates in
        `group`."""
        self.ctx.emit.status(req.id, node, Status.SELECTED)
        need = times * group.width
        spec = [c for c in node.children if c.alive]
        if not spec:
            req.plan(node, [(group.id, need)])
            return Counts()
        if self.ctx.policy.async_expand:
            counts = self._keep_drawn(req, spec, need, group)
        else:
            counts = self._branch_siblings(req, node, spec[0], need - spec[0].potential, group)
            counts += self._confirm(req, spec[0], group)
        req.cancel_plan(node)
        return counts

    def _keep_drawn(self, req: Request, children: list[Node], need: int, group: Group) -> Counts:
        """Children drawn before selection stand for more draws than needed: keep a uniform random
        subset of `need` draws (multivariate hypergeometric), which leaves them independent
        samples."""
        pool = np.repeat(np.arange(len(children)), [c.potential for c in children])
        parent = children[0].parent
        assert parent is not None
        rng = np.random.default_rng(mix_seed(parent.seed, 4))
        take = np.bincount(
            rng.choice(pool, size=min(need, len(pool)), replace=False), minlength=len(children)
        )
        counts = Counts()
        for child, n in zip(children, take):
            if n == 0:
                counts += self.prune(req, child, "selection")
            else:
                counts.spec_tokens_wasted += len(child.tokens) * (child.potential - int(n))
                child.potential = int(n)
                counts += self._confirm(req, child, group)
        return counts

    def _confirm(self, req: Request, child: Node, group: Group) -> Counts:
        """A speculative child of a selected node becomes a standard candidate of `group`."""
        child.speculative = False
        if child.status is Status.SPECULATIVE:
            self.ctx.emit.status(req.id, child, Status.GENERATING)
        counts = Counts(spec_tokens_reused=len(child.tokens) * child.potential)
        req.join(child, group.id)
        if child.step_done:
            if child.path_complete and not self.ctx.verification.keeps_kv(req, child):
                self.ctx.kv.free(child)
            if child.score is None:
                self.ctx.verification.push(req, child)
            speculate(self.ctx, req, child)
        return counts

    def _branch_siblings(
        self,
        req: Request,
        parent: Node,
        spec: Node,
        n: int,
        group: Group,
    ) -> Counts:
        """Speculative beam extension: the siblings of the child that kept the speculative tokens
        start from a truncated prefix of them (spec_reuse_fraction), so they reuse work and still
        diverge."""
        counts = Counts()
        if n <= 0:
            return counts
        j = min(int(len(spec.tokens) * self.ctx.policy.spec_reuse_fraction), len(spec.tokens) - 1)
        potentials = [n] if self.ctx.policy.dedup else [1] * n
        for k, potential in enumerate(potentials):
            sib = req.tree.add_child(
                parent,
                potential=potential,
                base=spec.base,
                offset=spec.offset,
                seed=mix_seed(parent.seed, 3, k),
            )
            req.join(sib, group.id)
            if j >= 1:
                sib.tokens = spec.tokens[:j]
                sib.raw = bytearray(b"".join(self.ctx.generator.token_piece(t) for t in sib.tokens))
                sib.pending = sib.tokens[-1]
                counts.spec_tokens_reused += j * potential
            else:
                sib.pending = parent.tokens[-1]  # re-feed the parent's last token to sample afresh
            if spec.seq is None:
                sib.evicted = True  # rebuilt from a relative when it first runs
            else:
                sib.seq = self.ctx.generator.fork(spec.seq)
                self.ctx.generator.truncate(sib.seq, spec.base + max(j, 0) - 1)
            self.ctx.emit(NodeAdded(req.id, sib.id, parent.id, sib.depth, potential, False))
            if sib.tokens:
                self.ctx.emit(NodeExtended(req.id, sib.id, sib.text, len(sib.tokens)))
        return counts

    def prune(self, req: Request, node: Node, rule: str, include_root: bool = False) -> Counts:
        """Prune `node` and its live subtree (the root only with include_root: it holds the
        prompt); returns the speculative tokens lost."""
        now, counts = time.perf_counter(), Counts()
        for n in node.subtree():
            if not n.alive or (n is req.tree.root and not include_root):
                if n is req.tree.root:
                    self.ctx.kv.free(n)
                    req.cancel_plan(n)
                continue
            if n.speculative:
                counts.spec_tokens_wasted += len(n.tokens) * n.potential
            if n.finished_at is not None and not n.waited:
                n.waiting_s = now - n.finished_at
                n.waited = True
            req.prm_stale = True
            req.cancel_plan(n)
            n.pending = None
            self.ctx.kv.free(n)
            self.ctx.emit.status(req.id, n, Status.PRUNED, rule)
        return counts
