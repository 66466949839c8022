"""The Verifier protocol on torch: path_verifier.py's path bookkeeping (per-path KV reuse through
fork and truncate, shared question heads, least-recently-used eviction, halving on a full cache)
over a torch context.

Only the few logits a format reads leave the device: the good and bad tokens of a token-probability
format (judge, rlhflow, math-shepherd), or the k tokens a value head reads; the host turns them into
the score exactly as the llama.cpp verifier does. A value head's features are llama.cpp's too: the
middle layers it reads follow the logits (each layer's output at the step's last token, as
llama.cpp's layer capture reads "l_out-<il>"), and its LoRA adapter is merged into the verifier's
own copy of the adapted weights (lora.py), never the generator's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgereason.backends.path_verifier import PathVerifier, RowReader
from edgereason.backends.prm_format import PRMFormat
from edgereason.backends.torch.kv import SEQ_SLOTS
from edgereason.backends.torch.lora import with_adapter
from edgereason.backends.torch.model import TorchModel
from edgereason.backends.torch.runtime import TorchContext
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead
from edgereason.protocols import ScoreRequest


def check_head(model: TorchModel, head: ValueHead) -> None:
    """ConfigError unless the model has every layer the head reads, of the width it reads."""
    if head.layers and (head.layer_width != model.n_embd or max(head.layers) >= model.n_layer):
        raise ConfigError(
            f"the value head reads layers {list(head.layers)} of width {head.layer_width}, which "
            f"{model.path.name} ({model.n_layer} layers of {model.n_embd}) does not have: "
            "corrupt head file; train it again with edgereason train-prm"
        )


class TorchVerifier(PathVerifier):
    def __init__(
        self,
        model: TorchModel,
        fmt: PRMFormat,
        kv_tokens: int,
        n_seq_max: int = SEQ_SLOTS,
        head: ValueHead | None = None,
    ) -> None:
        read: RowReader | None = None  # None: the head format without a head (score says so)
        columns: list[int] = []
        layers: tuple[int, ...] = ()
        if fmt.name == "head" and head is not None:
            check_head(model, head)  # its layers first: the backbone's sha256 reads the file
            head.check_backbone(model.path, model.n_vocab)
            if head.adapter:
                model = with_adapter(model, head.adapter.path)
            columns, layers = [int(t) for t in head.tokens], head.layers
            read = head.score_features  # the row: its tokens' logits, then its layers: features
        elif fmt.name != "head":
            good = model.tokenize(fmt.good, add_bos=False, special=False)[0]
            bad = model.tokenize(fmt.bad, add_bos=False, special=False)[0]
            columns = [good, bad]
            read = _two_token_score  # softmax over the two tokens
        # its passes are prefills that read a few columns: on CUDA replayed as prefill graphs
        # (prefill_graphs.py)
        ctx = TorchContext(model, kv_tokens, n_seq_max=n_seq_max, columns=columns, layers=layers)
        # model: with a head's adapter, the verifier's own merged copy
        super().__init__(f"{model.name}:{fmt.name}", model, fmt, ctx, read)

    def features(self, requests: Sequence[ScoreRequest], tokens: np.ndarray) -> list[np.ndarray]:
        raise ConfigError(
            "value-head training features are read on the llama.cpp backend; use --backend llamacpp"
        )


def _two_token_score(row: np.ndarray) -> float:
    """row: the logits of the good and the bad token -> P(good) against P(bad)."""
    return 1.0 / (1.0 + float(np.exp(row[1] - row[0])))
