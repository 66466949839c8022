"""The engine: one loop serves every running request. Each `step()` is schedule -> run ->
postprocess, then the verification queue may flush and ready groups are selected (design.md section
4).

Each concern owns its state and its integrity check: `kv_sequences.py` (generator sequences: fit,
evict, restore, free), `tree_growth.py` (sampled tokens -> nodes), `verification.py` (PRM queue,
flush, held PRM paths), `selector.py` (selection, pruning, expansion), `search/strategies.py` (what
beam search, best-of-N and DVTS do differently), `result.py` (the finished request's record). They
return what they counted (`counts.py`); the loop alone adds it to a request's metrics
(`counts.record`). Policies only change *when* things happen (speculate, verify, expand, prune); the
search they compute is the one of design.md section 3."""

from __future__ import annotations

import itertools
import time
from collections import deque

from edgereason.config import SearchConfig, mix_seed
from edgereason.engine.counts import Tally, record, record_one
from edgereason.engine.draw_seeds import draw_params
from edgereason.engine.events import Emitter, Listener, NodeAdded, Progress, RequestDone
from edgereason.engine.finished import build_result
from edgereason.engine.kv_sequences import KVSequences
from edgereason.engine.policy import DEFAULT_LV_THRESHOLD, Policy
from edgereason.engine.prompt import prompt_ids
from edgereason.engine.request import Request, RequestStatus
from edgereason.engine.result import SearchResult, completed_reason
from edgereason.engine.scheduler import PassRow, can_admit, check_beams, schedule
from edgereason.engine.selector import Selector
from edgereason.engine.stats import EngineStats
from edgereason.engine.step_context import StepContext
from edgereason.engine.tree_growth import TreeGrower
from edgereason.engine.verification import FlushFailed, VerifyQueue, VerifyStage
from edgereason.protocols import BatchEntry, Generator, Verifier
from edgereason.tree import Status
from edgereason.util.text import clean


class Engine:
    """Rules: `requests` holds the running requests only (a finished one leaves; its result stays on
    the Request the caller got from `submit`); `waiting` holds, in arrival order, the submitted ones
    whose beams do not fit in the sequence slots yet; `stats` sums what the models did over the
    engine's life."""

    def __init__(
        self,
        generator: Generator,
        verifier: Verifier,
        policy: Policy | None = None,
        on_event: Listener | None = None,
    ) -> None:
        self.generator, self.verifier = generator, verifier
        self.policy = policy or Policy()
        self.emit = Emitter(on_event)
        self.stats = EngineStats()
        self.requests: list[Request] = []
        self.waiting: deque[Request] = deque()
        mode = (
            "lazy" if self.policy.lazy_verify else ("eager" if self.policy.async_expand else "sync")
        )
        threshold = self.policy.lv_threshold or DEFAULT_LV_THRESHOLD["cpu"]
        queue = VerifyQueue(mode, threshold, self.policy.lv_max_defer)
        self.kv = KVSequences(generator)
        self.verification = VerifyStage(
            verifier, queue, self.policy.lookahead, self.emit, self.stats
        )
        step_context = StepContext(generator, self.kv, self.verification, self.policy, self.emit)
        self.grower, self.selector = TreeGrower(step_context), Selector(step_context)
        self._ids = itertools.count()
        self.steps = 0

    # ------------------------------------------------------------------ requests
    def submit(
        self, question: str, config: SearchConfig, request_id: str | None = None, prefix: str = ""
    ) -> Request:
        """prefix: solution text the search continues from (Monte-Carlo labels of a step prefix);
        the tree and the paths hold only what is generated after it. Raises ConfigError for a
        problem or a beam count that cannot fit. The request starts at once where its beams fit in
        the sequence slots, else it waits for them."""
        # from a non-UTF-8 terminal or file: U+FFFD, not an error in a tokenizer
        question = clean(question)
        check_beams(self.generator, config)
        prompt = prompt_ids(self.generator, question, prefix)
        req = Request(
            request_id or f"r{next(self._ids)}", question, config, prompt, status="waiting"
        )
        self.waiting.append(req)
        self._admit()
        return req

    def _admit(self) -> None:
        """Start waiting requests, first come first, while the next one's beams fit (can_admit, then
        start)."""
        while self.waiting and can_admit(self.waiting[0], self.requests, self.generator):
            self._start(self.waiting.popleft())

    def _start(self, req: Request) -> None:
        root = req.tree.root
        root.seed = mix_seed(req.config.sampling.seed)
        root.seq = self.generator.new_seq()
        req.plan(
            root,
            [
                (req.new_group(keep, width).id, draws)
                for keep, width, draws in req.strategy.first_plan(req.config)
            ],
        )
        req.status = "running"
        self.requests.append(req)
        self.emit(NodeAdded(req.id, root.id, None, 0, req.config.beams, False))

    def cancel(self, request_id: str, reason: str = "cancelled") -> None:
        for req in [r for r in (*self.waiting, *self.requests) if r.id == request_id]:
            self._end(req, "cancelled", reason)

    @property
    def busy(self) -> bool:
        return bool(self.requests or self.waiting)

    def solve(self, question: str, config: SearchConfig, check: bool = False) -> SearchResult:
        req = self.submit(question, config)
        while req.result is None:
            self.step()
            if check:
                self.check_integrity()
        return req.result

    def run_until_done(self, check: bool = False) -> list[SearchResult]:
        """Step until every running request finished; their results in submission order."""
        reqs = [*self.requests, *self.waiting]
        while self.busy:
            self.step()
            if check:
                self.check_integrity()
        return [r.result for r in reqs if r.result is not None]

    # ------------------------------------------------------------------ the loop
    def step(self) -> None:
        """One forward pass for every running request (schedule -> fit the KV -> run ->
        postprocess), then maybe one PRM call, then selection per request."""
        self.steps += 1
        self._admit()
        running = list(self.requests)
        work = schedule(running, self.generator, self.policy)
        batch, failed, counted = self.kv.fit(work, running, self.steps)
        record(counted)
        for req, error in failed:
            self._end(req, "failed", str(error))
        if batch:
            counted = self.grower.postprocess(batch, self._run(batch))
            record(counted)
            self._record_peak_kv(counted)
        scored = self._verify(generator_idle=not batch)
        for req in running:
            if req.status == "running":
                self._select_then_end_or_report(req, moved=bool(batch) or scored)

    def _verify(self, generator_idle: bool) -> bool:
        """Let the PRM score its queue if its rules say so; True when it ran. Out of PRM memory
        fails the requests it was scoring."""
        try:
            counted = self.verification.flush(generator_idle)
        except FlushFailed as f:
            record(f.counts)
            for req in f.requests:
                self._end(req, "failed", str(f.error))
            return False
        if counted is None:
            return False
        record(counted)
        return True

    def _run(self, batch: list[PassRow]) -> list[list[int]]:
        t0 = time.perf_counter()
        draws = self.generator.step(
            [BatchEntry(w.node.seq, w.tokens) for w in batch],
            [w.draws for w in batch],
            draw_params(batch),
        )
        dt = time.perf_counter() - t0
        self.stats.gen_pass(sum(1 for w in batch if w.draws), dt)
        for req in {id(w.request): w.request for w in batch}.values():
            req.metrics.gen_time_s += dt
        return draws

    def _record_peak_kv(self, batch: Tally) -> None:
        """The KV in use after a pass, the most each request of its batch saw."""
        gen_used, ver_used = self.generator.kv_used_tokens, self.verifier.kv_used_tokens
        for req, _ in batch:
            m = req.metrics
            m.peak_kv_tokens = max(m.peak_kv_tokens, gen_used + ver_used)
            m.peak_generator_kv_tokens = max(m.peak_generator_kv_tokens, gen_used)
            m.peak_verifier_kv_tokens = max(m.peak_verifier_kv_tokens, ver_used)

    def _select_then_end_or_report(self, req: Request, moved: bool) -> None:
        """Select ready groups and prune early, then finish the request, fail it if it is stuck, or
        report."""
        selected = req.selected_groups()
        record_one(req, self.selector.select_ready(req))
        record_one(req, self.selector.early_prune(req))
        moved = moved or req.selected_groups() != selected
        req.idle_steps = 0 if moved else req.idle_steps + 1
        if req.prm_stale:
            self.verification.release_dead(req)
        if not req.busy():
            self._progress(req)  # the last figures, every finished path counted
            self._end(req, "done", completed_reason(req.completed))
        elif req.idle_steps > 2:  # nothing can run, score or be selected: never spin forever
            self._end(
                req,
                "failed",
                "the search cannot make progress with the KV memory it has; raise --kv-budget (or "
                "--kv-tokens)",
            )
        else:
            self._progress(req)

    # ------------------------------------------------------------------ the end of a request
    def _end(self, req: Request, status: RequestStatus, reason: str) -> None:
        """Finish a running or waiting request: prune what still runs, free its KV and PRM paths,
        build its result, and let it leave the engine."""
        if req.status not in ("running", "waiting"):
            return
        (self.requests if req.status == "running" else self.waiting).remove(req)
        if status == "done":
            for n in list(req.tree.steps()):
                if n.alive and n.status not in (Status.COMPLETE, Status.SELECTED):
                    record_one(req, self.selector.prune(req, n, "done"))
            self.kv.free(req.tree.root)
        else:
            record_one(req, self.selector.prune(req, req.tree.root, "cancelled", include_root=True))
        req.status, req.reason = status, reason
        self.verification.forget(req)
        req.result = build_result(req)
        self._progress(req)  # the request's totals, and the KV in use now that its share is free
        self.emit(RequestDone(req.id, req.result))

    # ------------------------------------------------------------------ events and checks
    def _progress(self, req: Request) -> None:
        if self.emit.listener is None:
            return
        self.emit(
            Progress(
                req.id,
                req.metrics.generated_tokens,
                time.perf_counter() - req.started_at,
                req.metrics.prm_calls,
                self.generator.kv_used_tokens,
                self.generator.kv_capacity_tokens,
                self.verifier.kv_used_tokens,
                self.verifier.kv_capacity_tokens,
                req.metrics.spec_tokens_reused,
                req.completed_logical(),
            )
        )

    def check_integrity(self) -> None:
        """Exact invariants (design.md section 4); raises AssertionError on the first violation."""
        for req in self.requests:
            req.check()
        self.kv.check(n for req in self.requests for n in req.tree.nodes.values())
        self.verification.check(self.requests)
