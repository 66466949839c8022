"""The one interface under the roles (context_roles.Context, ContextModel): llama.cpp's KVContext
and torch's TorchContext over SmolLM2 both keep it, and the same calls through it count alike."""

from __future__ import annotations

import pytest

from edgereason.backends.context_roles import Context, ContextModel, DecodeItem


@pytest.fixture()
def contexts(smollm2, smollm2_path):
    """A llama.cpp and a torch context of 64 cells over one GGUF."""
    from edgereason.backends.llamacpp.runtime import KVContext
    from edgereason.backends.torch.model import load_model
    from edgereason.backends.torch.runtime import TorchContext

    opened = [KVContext(smollm2, 64, 4), TorchContext(load_model(str(smollm2_path), "cpu"), 64, 4)]
    yield opened
    for ctx in opened:
        ctx.close()


PROMPT = "Janet has 16 eggs."


def _through_the_interface(ctx: Context) -> tuple:
    """A prompt with its last row read, a fork cut back and appended to, then freed: what the
    interface hands back and counts."""
    prompt = ctx.model.tokenize(PROMPT, add_bos=ctx.model.add_bos)
    rows: list[tuple[object, int]] = []
    root = ctx.new_seq()
    ctx.decode(
        [DecodeItem(root, prompt, [(len(prompt) - 1, "last")])],
        lambda tag, row: rows.append((tag, len(row))),
    )
    child = ctx.fork(root)
    ctx.truncate(child, 3)
    evaluated = ctx.decode([DecodeItem(child, [28, 1848], [])], lambda *_: None)
    ctx.check_integrity()
    counts = (ctx.used_tokens, ctx.live_seqs, ctx.seq_len(child), ctx.unique_tokens(child))
    ctx.free(child)
    return rows, evaluated, counts, ctx.used_tokens, ctx.can_alloc(3), ctx.can_append(64)


def test_both_contexts_keep_the_interface_and_count_alike(contexts):
    for ctx in contexts:
        assert isinstance(ctx, Context) and isinstance(ctx.model, ContextModel)
    model = contexts[0].model
    n_prompt = len(model.tokenize(PROMPT, add_bos=model.add_bos))
    # the row, tokens evaluated, (cells, sequences, the child's length and own cells), cells once
    # the child is freed, room for 3 more sequences, room for 64 more tokens
    want = ([("last", model.n_vocab)], 2, (n_prompt + 2, 2, 5, 2), n_prompt, True, False)
    assert [_through_the_interface(ctx) for ctx in contexts] == [want, want]
