"""The engine: one loop serves every active request. Each `step()` is schedule -> run -> postprocess, then the
verification queue may flush and ready groups are selected (design.md section 4).

Policies only change *when* things happen (speculate, verify, expand, prune); the search they compute is the
one of design.md section 3.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from edgereason import selection
from edgereason.config import SamplingParams, SearchConfig
from edgereason.errors import ConfigError, OutOfMemoryError
from edgereason.events import (Event, NodeAdded, NodeConfirmed, NodeExtended, NodePruned, NodeScored,
                               NodeSelected, Progress, RequestDone, StepFinished)
from edgereason.grading import answers_match, extract_boxed
from edgereason.policy import Policy
from edgereason.prompts import solve_messages
from edgereason.protocols import BatchEntry, Generator, ScoreRequest, Verifier
from edgereason.request import Group, Request
from edgereason.result import FinalPath, SearchResult
from edgereason.scheduler import Work, schedule
from edgereason.text import clean
from edgereason.tree import FINISH_WORDS, Node, Status, has_boxed_answer, mix_seed
from edgereason.verification import VerifyQueue

Listener = Callable[[Event], None]


class Engine:
    def __init__(self, generator: Generator, verifier: Verifier, policy: Policy | None = None,
                 on_event: Listener | None = None, lv_threshold: int = 512) -> None:
        self.generator = generator
        self.verifier = verifier
        self.policy = policy or Policy()
        self.on_event = on_event
        self.requests: list[Request] = []
        mode = "lazy" if self.policy.lazy_verify else ("eager" if self.policy.async_expand else "sync")
        self.queue = VerifyQueue(mode, self.policy.lv_threshold or lv_threshold, self.policy.lv_max_defer)
        self._ids = itertools.count()
        self._steps = 0
        self._last_prm_calls = 0
        self.prm_batches: list[int] = []  # requests per PRM call

    # ------------------------------------------------------------------ requests
    def submit(self, question: str, config: SearchConfig, request_id: str | None = None,
               prefix: str = "") -> Request:
        """prefix: solution text the search continues from (Monte-Carlo labels of a step prefix); the tree and
        the paths hold only what is generated after it."""
        question = clean(question)  # from a non-UTF-8 terminal or file: U+FFFD, not an error in a tokenizer
        if not question.strip():
            raise ConfigError("the problem is empty; pass the problem text (or - to read it from stdin)")
        prompt = self.generator.tokenize(self.generator.apply_chat_template(solve_messages(question)) + prefix)
        trained = self.generator.context_length
        if len(prompt) + 16 > trained:
            raise ConfigError(f"the problem is {len(prompt)} tokens but the generator {self.generator.name} was "
                              f"trained on at most {trained} tokens of context; shorten the problem or use a model "
                              "with a longer context")
        room = self.generator.kv_capacity_tokens
        if len(prompt) + 16 > room:
            raise ConfigError(f"the problem is {len(prompt)} tokens but the generator's KV memory holds {room}; "
                              "shorten the problem or raise --kv-budget")
        req = Request(request_id or f"r{next(self._ids)}", question, config, prompt)
        root = req.tree.root
        root.seed = mix_seed(config.sampling.seed)
        root.seq = self.generator.new_seq()
        cfg = config
        if cfg.strategy == "beam":
            req.plan(root, [(req.new_group("beam", cfg.keep, cfg.width).id, cfg.beams)])
        elif cfg.strategy == "dvts":
            req.plan(root, [(req.new_group("dvts", 1, cfg.width).id, cfg.width) for _ in range(cfg.beams // cfg.width)])
        else:
            req.plan(root, [(req.new_group("chain", 1, 1).id, 1) for _ in range(cfg.beams)])
        self.requests.append(req)
        self._emit(NodeAdded(req.id, root.id, None, 0, cfg.beams, False))
        return req

    def cancel(self, request_id: str, reason: str = "cancelled") -> None:
        for req in self.requests:
            if req.id == request_id and req.status == "running":
                self._prune(req, req.tree.root, "cancelled", include_root=True)
                req.status, req.reason = "cancelled", reason
                self._finish(req)

    def forget(self, req: Request) -> None:
        """A finished request leaves the engine (its result stays with the caller): a long-running engine does not
        keep every old tree."""
        assert req.result is not None, "only a finished request can leave the engine"
        self.requests.remove(req)

    @property
    def busy(self) -> bool:
        return any(r.status == "running" for r in self.requests)

    def solve(self, question: str, config: SearchConfig, check: bool = False) -> SearchResult:
        req = self.submit(question, config)
        while req.status == "running":
            self.step()
            if check:
                self.check_integrity()
        assert req.result is not None
        return req.result

    def run_until_done(self, check: bool = False) -> list[SearchResult]:
        while self.busy:
            self.step()
            if check:
                self.check_integrity()
        return [r.result for r in self.requests if r.result is not None]

    # ------------------------------------------------------------------ the loop
    def step(self) -> None:
        self._steps += 1
        running = [r for r in self.requests if r.status == "running"]
        batch = self._fit(schedule(running, self.generator, self.policy))
        if batch:
            draws = self._run(batch)
            self._postprocess(batch, draws)
        if self.queue.should_flush(generator_idle=not batch):
            items = self.queue.take()
            try:
                self._verify(items)
            except OutOfMemoryError as e:
                for req in {id(p.request): p.request for p in items}.values():
                    self._fail(req, e)
        flushed = bool(self.prm_batches) and self._last_prm_calls != len(self.prm_batches)
        self._last_prm_calls = len(self.prm_batches)
        for req in running:
            if req.status == "running":
                before = sum(g.selected for g in req.groups.values())
                self._select_ready(req)
                self._early_prune(req)
                moved = bool(batch) or flushed or sum(g.selected for g in req.groups.values()) != before
                req.idle_steps = 0 if moved else req.idle_steps + 1
                if req.prm_stale:
                    self._release_prm(req)
                if not req.busy():
                    self._finish(req)
                elif req.idle_steps > 2:  # nothing can run, score or be selected: never spin forever
                    self._fail(req, OutOfMemoryError(
                        "the search cannot make progress with the KV memory it has; raise --kv-budget"))
                else:
                    self._progress(req)

    # ------------------------------------------------------------------ KV room
    def _fit(self, batch: list[Work]) -> list[Work]:
        """Make the batch fit the generator's KV: evict idle sequences (speculative first, then least recently
        used) and, if that is not enough, defer the batch's tail. Evicted KV is rebuilt when it runs again."""
        need = sum(w.cost for w in batch)
        short = need > self.generator.kv_capacity_tokens - self.generator.kv_used_tokens
        victims = self._eviction_order(batch) if short else []
        while need > self.generator.kv_capacity_tokens - self.generator.kv_used_tokens:
            if victims:
                self._evict(victims.pop())
            elif len(batch) > 1:
                dropped = batch.pop()
                need -= dropped.cost
                if dropped.node.seq is not None and dropped.node.depth > 0:
                    victims.insert(0, dropped.node)
            else:
                work = batch.pop()
                self._fail(work.request, OutOfMemoryError(
                    f"one search path needs {work.cost} KV tokens but the generator has "
                    f"{self.generator.kv_capacity_tokens}; raise --kv-budget or lower --max-tokens"))
                return []
        return [self._restore(w) if w.restore else w for w in batch]

    def _eviction_order(self, batch: list[Work]) -> list[Node]:
        """Resident nodes outside the batch, the best victim last (pop() takes it)."""
        in_batch = {id(w.node) for w in batch}
        victims = sorted((n for r in self.requests if r.status == "running" for n in r.tree.steps()
                          if n.seq is not None and id(n) not in in_batch),
                         key=lambda n: (not n.speculative, n.last_run, n.id))
        victims.reverse()
        return victims

    def _evict(self, node: Node) -> None:
        req = next(r for r in self.requests if r.tree.nodes.get(node.id) is node)
        self.generator.free(node.seq)
        node.seq, node.evicted = None, True
        req.metrics.evictions += 1

    def _restore(self, work: Work) -> Work:
        """Rebuild an evicted node's KV: fork the relative that shares the longest prefix, recompute the rest."""
        req, node = work.request, work.node
        stream = list(req.prompt_ids)
        for a in node.path():
            stream += a.tokens
        fed = len(node.tokens) - 1 if node.tokens else -1  # an empty node re-feeds its parent's last token
        target = node.base + fed
        donor, share = None, 0
        ancestor: Node | None = node.parent
        while ancestor is not None and donor is None:
            end = len(req.prompt_ids) + ancestor.offset + len(ancestor.tokens) if ancestor.depth else len(
                req.prompt_ids)
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
        req.metrics.recomputed_tokens += len(rebuilt)
        return work._replace(tokens=rebuilt + work.tokens, restore=0)

    def _run(self, batch: list[Work]) -> list[list[int]]:
        entries = [BatchEntry(w.node.seq, w.tokens) for w in batch]
        sampling = [_draw_params(w) for w in batch]
        t0 = time.perf_counter()
        draws = self.generator.step(entries, [w.draws for w in batch], sampling)
        dt = time.perf_counter() - t0
        for req in {id(w.request): w.request for w in batch}.values():
            req.metrics.gen_time_s += dt
        return draws

    def _postprocess(self, batch: list[Work], draws: list[list[int]]) -> None:
        for work, tokens in zip(batch, draws):
            req, node = work.request, work.node
            node.last_run = self._steps
            req.metrics.forward_rows += 1 if work.draws else 0
            req.metrics.dedup_saved_rows += max(0, work.draws - 1) if self.policy.dedup else 0
            if node is req.tree.root and req.prompt_fed < len(req.prompt_ids):
                req.prompt_fed += len(work.tokens)
            else:
                node.pending = None  # fed
            if work.expand:
                self._make_children(req, node, tokens)
            elif tokens:
                self._decode(req, node, tokens)
        gen_used, ver_used = self.generator.kv_used_tokens, self.verifier.kv_used_tokens
        for req in {id(w.request): w.request for w in batch}.values():
            m = req.metrics
            m.peak_kv_tokens = max(m.peak_kv_tokens, gen_used + ver_used)
            m.peak_generator_kv_tokens = max(m.peak_generator_kv_tokens, gen_used)
            m.peak_verifier_kv_tokens = max(m.peak_verifier_kv_tokens, ver_used)

    # ------------------------------------------------------------------ tokens
    def _decode(self, req: Request, node: Node, tokens: list[int]) -> None:
        """`tokens`: node.potential draws from one distribution. Equal draws stay one node; if they differ the
        node splits into siblings of the same step prefix (deduplication), each continuing its own draw."""
        groups = Counter(tokens) if len(tokens) > 1 else Counter({tokens[0]: 1})
        (first, first_n), *rest = groups.items()
        twins = []
        for k, (token, count) in enumerate(rest, start=1):
            twin = req.tree.add_sibling_copy(node, potential=count, base=node.base, offset=node.offset,
                                             seed=mix_seed(node.seed, 1, len(node.tokens), k))
            twin.seq = self.generator.fork(node.seq)
            req.join(twin, node.group)
            twins.append((twin, token))
            self._emit(NodeAdded(req.id, twin.id, node.parent.id if node.parent else None, twin.depth,
                                 count, twin.speculative))
        node.potential = first_n
        self._append(req, node, first)
        for twin, token in twins:
            self._append(req, twin, token)

    def _append(self, req: Request, node: Node, token: int) -> None:
        cfg = req.config
        # a node of potential p drew p equal tokens: p logical candidates, as without deduplication
        req.metrics.generated_tokens += node.potential
        if node.speculative:
            req.metrics.spec_tokens += node.potential
        if token in self.generator.eos_ids:
            self._end_step(req, node, "eos")
            return
        piece = self.generator.token_piece(token)
        node.tokens.append(token)
        node.raw += piece
        node.pending = token
        self._emit(NodeExtended(req.id, node.id, node.text, len(node.tokens)))
        if node.step_ended_by(piece) or len(node.tokens) >= cfg.max_step_tokens:
            self._end_step(req, node, "answer" if has_boxed_answer(node.text) else "step")
        elif node.offset + len(node.tokens) >= cfg.max_path_tokens:
            self._end_step(req, node, "length")
        elif node.base + len(node.tokens) + 1 >= self.generator.kv_capacity_tokens:
            self._end_step(req, node, "length")

    def _end_step(self, req: Request, node: Node, finish: str) -> None:
        if finish == "step" and node.depth >= req.config.max_steps:
            finish = "max_steps"
        if finish == "step" and node.offset + len(node.tokens) >= req.config.max_path_tokens:
            finish = "length"
        node.finish = finish
        node.finished_at = time.perf_counter()
        node.status = Status.WAITING
        if node.path_complete:
            node.waited = True
            if not node.speculative:
                self._free_seq(node)
        self._emit(StepFinished(req.id, node.id, finish))
        group = req.groups.get(node.group) if node.group is not None else None
        if group is not None and group.mode == "chain" and not node.path_complete:
            return  # best-of-N scores whole solutions only
        if not node.speculative or self.policy.async_expand:
            self.queue.push(req, node)
        self._speculate(req, node)

    def _speculate(self, req: Request, node: Node) -> None:
        """A standard candidate that finished its step early starts its next step before selection."""
        group = req.groups.get(node.group) if node.group is not None else None
        if node.speculative or node.path_complete or group is None or group.steps_done() or node.children:
            return
        if self.policy.async_expand:
            req.plan(node, [(None, req.config.width * min(node.potential, group.keep))], speculative=True)
        elif self.policy.speculative_extension:
            req.plan(node, [(None, 1)], speculative=True)

    def _make_children(self, req: Request, parent: Node, draws: list[int]) -> None:
        """Turn the draws of one forward pass into children, group by group of the parent's plan."""
        plan, speculative = parent.plan or [], parent.plan_speculative
        req.cancel_plan(parent)
        if parent.finished_at is not None and not parent.waited:
            parent.waiting_s = time.perf_counter() - parent.finished_at
            parent.waited = True
        specs: list[tuple[int | None, int, int]] = []  # (group, token, potential)
        i = 0
        for group_id, n in plan:
            chunk = draws[i:i + n]
            i += n
            if self.policy.dedup:
                specs += [(group_id, tok, cnt) for tok, cnt in Counter(chunk).items()]
            else:
                specs += [(group_id, tok, 1) for tok in chunk]
        base = self.generator.seq_len(parent.seq)
        offset = parent.offset + len(parent.tokens)
        children = []
        for idx, (group_id, token, potential) in enumerate(specs):
            child = req.tree.add_child(parent, potential=potential, speculative=speculative, base=base,
                                       offset=offset, status=Status.SPECULATIVE if speculative else Status.GENERATING,
                                       seed=mix_seed(parent.seed, 2, idx))
            req.join(child, group_id)
            # the last child takes the parent's sequence over; the others share its KV through forks
            child.seq = parent.seq if idx == len(specs) - 1 else self.generator.fork(parent.seq)
            children.append((child, token))
            self._emit(NodeAdded(req.id, child.id, parent.id, child.depth, potential, speculative))
        parent.seq = None
        for child, token in children:
            self._append(req, child, token)

    # ------------------------------------------------------------------ verification
    def _verify(self, items) -> None:
        by_req: dict[str, list[Node]] = {}
        reqs: dict[str, Request] = {}
        for p in items:
            if p.node.alive and p.node.score is None and p.request.status == "running":
                by_req.setdefault(p.request.id, []).append(p.node)
                reqs[p.request.id] = p.request
        calls: list[tuple[Request, list[Node], ScoreRequest]] = []
        for rid, nodes in by_req.items():
            req = reqs[rid]
            for node in nodes:
                calls.append(self._score_request(req, node))
        if not calls:
            return
        t0 = time.perf_counter()
        results = self.verifier.score([c[2] for c in calls])
        dt = time.perf_counter() - t0
        self.prm_batches.append(len(calls))
        for req in reqs.values():
            req.metrics.prm_calls += 1
            req.metrics.prm_time_s += dt
        for (req, nodes, sreq), res in zip(calls, results):
            req.metrics.prm_tokens += res.new_tokens
            req.metrics.prm_requests += 1
            for node, score in zip(nodes, res.scores):
                node.score = score
                if node.status is Status.WAITING:
                    node.status = Status.VERIFIED
                self._emit(NodeScored(req.id, node.id, score))
            for node in nodes:
                node.prm_key = sreq.key
            req.prm_held.add(sreq.key)

    def _score_request(self, req: Request, node: Node) -> tuple[Request, list[Node], ScoreRequest]:
        """The PRM request for one finished step: best-of-N scores whole paths; with lookahead a finished
        speculative child is scored in the same request."""
        path = node.path()
        nodes = [node]
        group = req.groups.get(node.group) if node.group is not None else None
        if group is not None and group.mode == "chain":
            nodes = [n for n in path if n.score is None]
        elif self.policy.lookahead:
            ahead = [c for c in node.children if c.alive and c.step_done and c.score is None and c.tokens]
            if ahead:
                nodes = [node, ahead[0]]
                path = ahead[0].path()
                req.metrics.lookahead_scores += 1
        parent = node.parent if node.parent is not None and node.parent.depth > 0 else None
        # a first step shares the question's head, held under the root's key
        prefix_key = parent.prm_key if parent is not None else req.key(req.tree.root)
        return req, nodes, ScoreRequest(
            key=req.key(nodes[-1]), question=req.question, steps=[n.text for n in path],
            need=[n.depth - 1 for n in nodes], prefix_key=prefix_key,
            prefix_steps=parent.depth if parent is not None else 0)

    # ------------------------------------------------------------------ selection
    def _ready(self, req: Request, group: Group) -> bool:
        alive = group.alive()
        if not alive or not group.steps_done():
            return False
        if group.mode == "chain":
            return all(m.score is not None or not m.path_complete for m in alive)
        return all(m.score is not None for m in alive)

    def _select_ready(self, req: Request) -> None:
        for group in list(req.open_groups()):
            if req.status == "running" and self._ready(req, group):
                self._select(req, group, selection.choose(group, req.config.aggregation))
        for group in req.groups.values():
            if not group.selected and group.members and not group.alive():
                group.selected = True  # everything in it was pruned

    def _select(self, req: Request, group: Group, chosen: list[tuple[Node, int]], rule: str = "selection") -> None:
        group.selected = True
        group.kept = sum(t for _, t in chosen)
        req.common_prefix.append(selection.common_prefix_share([m for m in group.alive() if m.step_done]))
        kept = {id(n) for n, _ in chosen}
        for m in group.alive():
            if m.path_complete and m.score is not None and id(m) not in kept:
                self._complete(req, m)
        finished_subtree = False
        for node, times in chosen:
            node.times_selected = times
            self._emit(NodeSelected(req.id, node.id, times))
            if node.path_complete:
                self._complete(req, node)
                finished_subtree = True
        for m in group.alive():
            if id(m) not in kept and m.status is not Status.COMPLETE:
                self._prune(req, m, rule)
        if group.mode == "beam" and req.completed_logical() >= req.config.beams:
            for node, _ in chosen:
                if node.status is not Status.COMPLETE:
                    self._prune(req, node, "done")
            return
        if finished_subtree and group.mode != "beam":
            return
        nxt = req.new_group(group.mode, group.keep, group.width) if chosen else None
        for node, times in chosen:
            if not node.path_complete:
                self._expand(req, node, times, nxt)
        for m in group.members:  # every child of these parents was scored: their PRM prefixes are done
            if m.parent is not None:
                m.parent.prm_key = None
        req.prm_stale = True

    def _release_prm(self, req: Request) -> None:
        """Free the PRM paths no live node can extend any more. On a unified KV cache every row of a forward pass
        attends over all cells in use, so dead paths would slow every later PRM call, not only take memory."""
        live = {n.prm_key for n in req.tree.steps()
                if n.prm_key and n.alive and n.status is not Status.COMPLETE}
        for key in req.prm_held - live:
            self.verifier.release(key)
        req.prm_held &= live
        req.prm_stale = False

    def _complete(self, req: Request, node: Node) -> None:
        if node.status is not Status.COMPLETE:
            node.status = Status.COMPLETE
            req.prm_stale = True
            self._free_seq(node)
            req.completed.append(node)

    def _expand(self, req: Request, node: Node, times: int, group: Group) -> None:
        """A node selected `times` times continues as `times * width` logical candidates in `group`."""
        node.status = Status.SELECTED
        need = times * group.width
        spec = [c for c in node.children if c.alive]
        if not spec:
            req.plan(node, [(group.id, need)])
            return
        if self.policy.async_expand:
            self._keep_drawn(req, spec, need, group)
        else:
            self._branch_siblings(req, node, spec[0], need - spec[0].potential, group)
            self._confirm(req, spec[0], group)
        req.cancel_plan(node)

    def _keep_drawn(self, req: Request, children: list[Node], need: int, group: Group) -> None:
        """Children drawn before selection stand for more draws than needed: keep a uniform random subset of
        `need` draws (multivariate hypergeometric), which leaves them independent samples."""
        pool = np.repeat(np.arange(len(children)), [c.potential for c in children])
        rng = np.random.default_rng(mix_seed(children[0].parent.seed, 4))
        take = np.bincount(rng.choice(pool, size=min(need, len(pool)), replace=False),
                           minlength=len(children))
        for child, n in zip(children, take):
            if n == 0:
                self._prune(req, child, "selection")
            else:
                req.metrics.spec_tokens_wasted += len(child.tokens) * (child.potential - int(n))
                child.potential = int(n)
                self._confirm(req, child, group)

    def _confirm(self, req: Request, child: Node, group: Group) -> None:
        child.speculative = False
        if child.status is Status.SPECULATIVE:
            child.status = Status.GENERATING
        req.metrics.spec_tokens_reused += len(child.tokens) * child.potential
        req.join(child, group.id)
        self._emit(NodeConfirmed(req.id, child.id))
        if child.step_done:
            if child.path_complete:
                self._free_seq(child)
            if child.score is None:
                self.queue.push(req, child)
            self._speculate(req, child)

    def _branch_siblings(self, req: Request, parent: Node, spec: Node, n: int, group: Group) -> None:
        """Speculative beam extension: the siblings of the child that kept the speculative tokens start from a
        truncated prefix of them (spec_reuse_fraction), so they reuse work and still diverge."""
        if n <= 0:
            return
        j = int(len(spec.tokens) * self.policy.spec_reuse_fraction)
        if j >= len(spec.tokens):
            j = len(spec.tokens) - 1
        counts = [n] if self.policy.dedup else [1] * n
        for k, potential in enumerate(counts):
            sib = req.tree.add_child(parent, potential=potential, base=spec.base, offset=spec.offset,
                                     seed=mix_seed(parent.seed, 3, k))
            req.join(sib, group.id)
            if j >= 1:
                sib.tokens = spec.tokens[:j]
                sib.raw = bytearray(b"".join(self.generator.token_piece(t) for t in sib.tokens))
                sib.pending = sib.tokens[-1]
                req.metrics.spec_tokens_reused += j * potential
            else:
                sib.pending = parent.tokens[-1]  # re-feed the parent's last token to sample afresh
            if spec.seq is None:
                sib.evicted = True  # rebuilt from a relative when it first runs
            else:
                sib.seq = self.generator.fork(spec.seq)
                self.generator.truncate(sib.seq, spec.base + max(j, 0) - 1)
            self._emit(NodeAdded(req.id, sib.id, parent.id, sib.depth, potential, False))
            if sib.tokens:
                self._emit(NodeExtended(req.id, sib.id, sib.text, len(sib.tokens)))

    def _early_prune(self, req: Request) -> None:
        p = self.policy
        if not (p.early_prune_rank or p.early_prune_perfect):
            return
        for group in req.open_groups():
            if group.mode == "chain" or req.status != "running":
                continue
            if p.early_prune_perfect:
                chosen = selection.perfect_set(group, req.config.aggregation, p.perfect_score)
                if chosen is not None:
                    req.metrics.pruned_perfect += sum(1 for m in group.alive()
                                                      if m not in {n for n, _ in chosen})
                    self._select(req, group, chosen, rule="perfect")
                    continue
            if p.early_prune_rank:
                for node in selection.rank_prunable(group, req.config.aggregation):
                    req.metrics.pruned_rank += 1
                    self._prune(req, node, "rank")

    # ------------------------------------------------------------------ pruning and the end
    def _free_seq(self, node: Node) -> None:
        if node.seq is not None:
            self.generator.free(node.seq)
            node.seq = None

    def _prune(self, req: Request, node: Node, rule: str, include_root: bool = False) -> None:
        now = time.perf_counter()
        for n in node.subtree():
            if not n.alive or (n is req.tree.root and not include_root):
                if n is req.tree.root:
                    self._free_seq(n)
                    req.cancel_plan(n)
                continue
            if n.speculative:
                req.metrics.spec_tokens_wasted += len(n.tokens) * n.potential
            if n.finished_at is not None and not n.waited:
                n.waiting_s = now - n.finished_at
                n.waited = True
            n.status = Status.PRUNED
            req.prm_stale = True
            req.cancel_plan(n)
            n.pending = None
            self._free_seq(n)
            self._emit(NodePruned(req.id, n.id, rule))

    def _fail(self, req: Request, error: Exception) -> None:
        self._prune(req, req.tree.root, "cancelled", include_root=True)
        req.status, req.reason = "failed", str(error)
        self._finish(req)

    def _finish(self, req: Request) -> None:
        if req.result is not None:
            return
        if req.status == "running":
            req.status, req.reason = "done", _completed_reason(req.completed)
        for n in list(req.tree.steps()):
            if n.alive and n.status not in (Status.COMPLETE, Status.SELECTED):
                self._prune(req, n, "done")
        self._free_seq(req.tree.root)
        self.verifier.release(f"{req.id}/")
        self.queue.items = [p for p in self.queue.items if p.request is not req]
        req.result = self._result(req)
        self._emit(RequestDone(req.id, req.result))

    def _result(self, req: Request) -> SearchResult:
        cfg, m = req.config, req.metrics
        wall = time.perf_counter() - req.started_at
        finals = selection.ranked([n for n in req.completed if n.score is not None or not n.path_scores()],
                                  cfg.aggregation)
        paths, slots = [], cfg.beams
        for node in finals:
            if slots <= 0:
                break
            times = min(node.potential, slots)
            slots -= times
            paths.append(FinalPath([(s.text, s.score) for s in node.path()],
                                   selection.path_score(node, cfg.aggregation),
                                   extract_boxed("".join(s.text for s in node.path())), node.id, times))
        if cfg.vote == "best":
            answer = paths[0].answer if paths else None
        else:
            answer = _vote(paths, by_score=cfg.vote == "weighted")
        m.wall_s = wall
        m.final_tokens = _final_tokens([(req.tree.nodes[p.node_id], p.potential) for p in paths])
        m.goodput_tok_s = m.final_tokens / wall if wall > 0 else 0.0
        m.throughput_tok_s = m.generated_tokens / wall if wall > 0 else 0.0
        waits = [n.waiting_s for n in req.tree.steps() if n.finished_at is not None and not n.path_complete]
        m.waiting_ratio = (sum(waits) / len(waits)) / wall if waits and wall > 0 else 0.0
        # steps only: a first step's parent is None, the root (the prompt) is not a step (README: JSON output)
        tree = [{"id": n.id, "parent": n.parent.id if n.parent and n.parent.depth > 0 else None, "depth": n.depth,
                 "text": n.text, "score": n.score, "status": n.status.value, "finish": n.finish,
                 "potential": n.potential}
                for n in req.tree.nodes.values() if n.depth > 0]
        return SearchResult(req.id, req.question, answer, paths, tree, m, req.status, req.reason,
                            [n.score for n in req.tree.steps() if n.score is not None], list(req.common_prefix))

    # ------------------------------------------------------------------ events and checks
    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def _progress(self, req: Request) -> None:
        if self.on_event is None:
            return
        self._emit(Progress(req.id, req.metrics.generated_tokens, time.perf_counter() - req.started_at,
                            req.metrics.prm_calls, self.generator.kv_used_tokens, self.generator.kv_capacity_tokens,
                            self.verifier.kv_used_tokens, self.verifier.kv_capacity_tokens,
                            req.metrics.spec_tokens_reused))

    def check_integrity(self) -> None:
        """Exact invariants (design.md section 4); raises AssertionError on the first violation."""
        owners: dict[int, Node] = {}
        for req in self.requests:
            for n in req.tree.nodes.values():
                if n.seq is None:
                    continue
                assert n.alive, f"pruned node {n.id} still holds sequence {n.seq}"
                assert n.seq not in owners, f"sequence {n.seq} belongs to nodes {owners[n.seq].id} and {n.id}"
                owners[n.seq] = n
                if n.depth > 0:
                    fed = len(n.tokens) - (1 if n.pending is not None and n.tokens else 0)
                    if n.tokens or n.pending is None:
                        assert self.generator.seq_len(n.seq) == n.base + fed, f"node {n.id}: KV length drifted"
            for g in req.groups.values():
                if g.selected and g.kept:
                    assert g.kept <= g.keep, f"group {g.id} kept {g.kept} > {g.keep}"
                assert all(m.potential >= 1 for m in g.members)
        check = getattr(self.generator, "check_integrity", None)
        if check:
            check()
        live = getattr(self.generator, "ctx", None)
        if live is not None:
            assert live.live_seqs == len(owners), f"{live.live_seqs} live sequences, {len(owners)} owned by nodes"
        assert self.generator.kv_used_tokens <= self.generator.kv_capacity_tokens
        vcheck = getattr(self.verifier, "check_integrity", None)
        if vcheck:
            vcheck()


def _draw_params(work: Work) -> SamplingParams:
    """A random stream per (request seed, node, position): draws replay exactly after eviction and recompute,
    whatever else shares the batch."""
    node = work.node
    return replace(work.request.config.sampling, seed=mix_seed(node.seed, len(node.tokens), work.expand))


def _final_tokens(finals: Sequence[tuple[Node, int]]) -> int:
    """Tokens on the final candidates' paths, shared steps once. A deduplicated node stands for several equal
    nodes: a final one for `times` candidates, an earlier one for as many as its selection kept (capped by the final
    candidates below it), so the figure is the one the same tree would give without deduplication."""
    through: dict[int, tuple[Node, int]] = {}
    for leaf, times in finals:
        for node in leaf.path():
            through[id(node)] = (node, through.get(id(node), (node, 0))[1] + times)
    leaves = {id(leaf) for leaf, _ in finals}
    return sum(len(node.tokens) * (t if id(node) in leaves else min(node.times_selected or node.potential, t))
               for node, t in through.values())


def _completed_reason(completed: Sequence[Node]) -> str:
    """Why a search that ran to its end stopped: its completed paths (logical candidates) by how each ended."""
    by_finish: Counter[str] = Counter()
    for node in completed:
        by_finish[str(node.finish)] += node.potential
    total = sum(by_finish.values())
    detail = ", ".join(f"{n} {FINISH_WORDS.get(f, f)}" for f, n in by_finish.most_common())
    return f"completed {total} path{'s' if total != 1 else ''}" + (f" ({detail})" if detail else "")


def _vote(paths: Sequence[FinalPath], by_score: bool = True) -> str | None:
    """Majority over distinct answers, compared as math: each path counts its potential, times its score when
    by_score (weighted). Ties go to the answer of the better-ranked path (paths come best first)."""
    buckets: list[tuple[str, float]] = []
    for p in paths:
        if p.answer is None:
            continue
        for i, (ans, w) in enumerate(buckets):
            if answers_match(ans, p.answer):
                buckets[i] = (ans, w + (p.score if by_score else 1.0) * p.potential)
                break
        else:
            buckets.append((p.answer, (p.score if by_score else 1.0) * p.potential))
    if not buckets:
        return paths[0].answer if paths else None
    return max(buckets, key=lambda b: b[1])[0]
