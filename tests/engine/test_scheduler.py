"""The scheduler's batch rules on hand-built trees (the fake generator only answers budget and slot
questions)."""

from __future__ import annotations

from edgereason.config import SearchConfig
from edgereason.engine.policy import Policy
from edgereason.engine.request import Request
from edgereason.engine.scheduler import schedule
from edgereason.tree import Node, Status
from tests.fakes import FakeGenerator


def _request(rid: str, beams: int, prompt: int = 10) -> Request:
    req = Request(rid, "q", SearchConfig(beams=beams, width=2), [2] * prompt)
    req.prompt_fed = prompt  # the prompt is in: the root has no work left
    return req


def _decoding(req: Request, seq: int, speculative: bool = False) -> Node:
    node = req.tree.add_child(
        req.tree.root,
        speculative=speculative,
        status=Status.SPECULATIVE if speculative else Status.GENERATING,
    )
    node.tokens, node.pending, node.seq = [5], 5, seq
    return node


def test_speculative_work_only_fills_the_slots_standard_work_leaves() -> None:
    narrow, wide = _request("a", beams=2), _request("b", beams=4)
    for req, base in ((narrow, 0), (wide, 10)):
        standard = [_decoding(req, base + 1), _decoding(req, base + 2)]
        spec = _decoding(req, base + 3, speculative=True)
        standard[0].created_at = spec.created_at + 1  # order must not let it overtake standard work
    batch = schedule([narrow, wide], FakeGenerator(), Policy())
    picked = [(w.request.id, w.node.speculative) for w in batch]
    assert ("a", True) not in picked  # beams 2, two standard candidates: no room for speculation
    # beams 4: one, after all standard work
    assert picked.count(("b", True)) == 1 and picked[-1] == ("b", True)
    assert sum(1 for _, s in picked if not s) == 4


def test_spec_slots_give_speculation_rows_beyond_the_beams() -> None:
    req = _request("a", beams=2)
    for seq in (1, 2):
        _decoding(req, seq)
    specs = [_decoding(req, seq, speculative=True) for seq in (3, 4, 5)]
    for factor, runs in ((1.0, 0), (1.5, 1), (2.0, 2), (0.0, 0)):
        batch = schedule([req], FakeGenerator(), Policy(spec_slots=factor))
        # factor * 2 beams, less 2 standard rows
        assert sum(1 for w in batch if w.node in specs) == runs, factor
        assert sum(1 for w in batch if not w.node.speculative) == 2


def test_a_long_prompt_is_prefilled_in_chunks_and_draws_only_at_its_end() -> None:
    gen = FakeGenerator()
    req = Request("r", "q", SearchConfig(beams=4, width=2), [2] * 3000)
    group = req.new_group(2, 2)
    req.plan(req.tree.root, [(group.id, 4)])
    req.tree.root.seq = gen.new_seq()
    (first,) = schedule([req], gen, Policy())
    assert len(first.tokens) == gen.max_batch_tokens and first.draws == 0 and not first.expand
    req.prompt_fed += len(first.tokens)
    (last,) = schedule([req], gen, Policy())
    assert len(last.tokens) == 3000 - gen.max_batch_tokens and last.draws == 4 and last.expand


def test_a_batch_never_forks_more_sequences_than_the_backend_has_slots() -> None:
    gen = FakeGenerator()
    for _ in range(256 - 3):
        gen.new_seq()
    req = _request("r", beams=8)
    parent = _decoding(req, 1)
    parent.finish = "step"
    req.plan(parent, [(req.new_group(4, 2).id, 8)])  # 8 draws: up to 7 forks
    small = _decoding(req, 2)
    batch = schedule([req], gen, Policy())
    assert [w.node for w in batch] == [small]
    for seq in list(gen.seqs)[:6]:  # 9 free slots: room for the 7 forks
        gen.free(seq)
    assert [w.node for w in schedule([req], gen, Policy())] == [parent, small]


def test_prefix_order_keeps_families_together_and_fifo_follows_creation() -> None:
    req = _request("r", beams=8)
    a, b = _decoding(req, 1), _decoding(req, 2)
    a.pending = None
    a.finish = "step"
    a1 = req.tree.add_child(a)
    a1.tokens, a1.pending, a1.seq = [6], 6, 3
    a1.created_at, b.created_at = 1.0, 2.0
    assert [w.node for w in schedule([req], FakeGenerator(), Policy(order="prefix"))] == [a1, b]
    a1.created_at = 3.0
    assert [w.node for w in schedule([req], FakeGenerator(), Policy(order="fifo"))] == [b, a1]


def test_nodes_that_cannot_run_leave_the_frontier_and_a_plan_brings_one_back() -> None:
    req = _request("a", beams=4)
    done, pruned, running = _decoding(req, 1), _decoding(req, 2), _decoding(req, 3)
    done.finish, done.pending = "step", None
    pruned.status = Status.PRUNED
    assert [w.node for w in schedule([req], FakeGenerator(), Policy())] == [running]
    assert list(req.tree.frontier) == [running.id]
    done.pending = 9  # its step's last token, fed with the children's draws
    req.plan(done, [(None, 2)])
    assert [w.node for w in schedule([req], FakeGenerator(), Policy())] == [done, running]
    assert sorted(req.tree.frontier) == [done.id, running.id]


def test_prefix_order_keeps_families_together() -> None:
    req = _request("a", beams=4)
    first, second = _decoding(req, 1), _decoding(req, 2)
    first.finish, first.pending = "step", None
    grandchild = req.tree.add_child(first, status=Status.GENERATING)
    grandchild.tokens, grandchild.pending, grandchild.seq = [6], 6, 3
    order = [w.node for w in schedule([req], FakeGenerator(), Policy(order="prefix"))]
    assert order == [grandchild, second]  # under the first child, though created after the second
