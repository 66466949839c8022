"""The Verifier protocol on llama.cpp: a token-probability PRM in turn style (judge, rlhflow), or a
trained value head on the generator's own prompt (head), with path_verifier.py's per-path KV reuse
in a KVContext. A value head on the generator's weights reads the generator's context where that
holds the path (generator_scoring.py), and `features` hands on what a head reads (training).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgereason.backends.llamacpp.generator_scoring import GeneratorScoring
from edgereason.backends.llamacpp.layer_capture import LayerCapture
from edgereason.backends.llamacpp.model import LlamaModel
from edgereason.backends.llamacpp.runtime import SEQ_SLOTS, KVContext
from edgereason.backends.path_verifier import PathVerifier, RowReader
from edgereason.backends.prm_format import PRMFormat
from edgereason.errors import ConfigError
from edgereason.heads.value_head import ValueHead, head_features
from edgereason.protocols import ScoreRequest


def _capture_for(model: LlamaModel, head: ValueHead) -> LayerCapture:
    """The capture of the head's layers; ConfigError where the model has no such layers or width."""
    try:
        if head.layer_width != model.n_embd:
            raise ValueError(f"rows of {head.layer_width} values, not {model.n_embd}")
        return LayerCapture(model.n_embd, model.n_layer, head.layers)
    except ValueError as e:
        raise ConfigError(
            f"the value head reads layers {list(head.layers)} of width {head.layer_width}, which "
            f"{model.path.name} ({model.n_layer} layers of {model.n_embd}) does not have ({e}): "
            "corrupt head file; train it again with edgereason train-prm"
        ) from None


def _reader(
    model: LlamaModel, fmt: PRMFormat, scorer: ValueHead | None, capture: LayerCapture | None
) -> RowReader | None:
    """How a row of logits becomes a score; None: the head format without a head (features only)."""
    if scorer is not None and scorer.layers:
        assert capture is not None
        return lambda logits: scorer.score(logits, capture.current())
    if scorer is not None:
        return scorer.score
    if fmt.name == "head":
        return None
    good = model.tokenize(fmt.good, add_bos=False, special=False)[0]
    bad = model.tokenize(fmt.bad, add_bos=False, special=False)[0]
    # softmax over the two tokens
    return lambda logits: 1.0 / (1.0 + float(np.exp(logits[bad] - logits[good])))


class LlamaVerifier(GeneratorScoring, PathVerifier):
    def __init__(
        self,
        model: LlamaModel,
        fmt: PRMFormat,
        kv_tokens: int,
        n_threads: int | None = None,
        n_seq_max: int = SEQ_SLOTS,
        flash_attn: bool = True,
        head: ValueHead | None = None,
        generator_ctx: KVContext | None = None,
        capture: LayerCapture | None = None,
    ) -> None:
        """generator_ctx: the generator's context on these same weights. A value head reads the
        generator's own prompt, so the generator's KV already holds what a step's score needs: a
        request naming a resident generator sequence is scored there, one row a step, instead of a
        prefill of the step here. Only where the generator's rows come back whole (host sampling): a
        row cut to its top k on the device lacks the logits the head reads. capture: hidden states
        of middle layers for `features` (training a head that reads them); a head that reads layers
        makes its own."""
        scorer = head if fmt.name == "head" else None
        if scorer is not None:
            scorer.check_backbone(model.path, model.n_vocab)
            if scorer.layers:
                capture = _capture_for(model, scorer)
        ctx = KVContext(
            model,
            kv_tokens,
            n_seq_max,
            n_threads=n_threads,
            flash_attn=flash_attn,
            capture=capture,
        )
        if scorer is not None and scorer.adapter:
            ctx.apply_lora(model.lora(scorer.adapter.path))
        # the generator's context captures no layers and runs no adapter: such a head scores here
        use_gen = (
            fmt.name == "head"
            and generator_ctx is not None
            and generator_ctx.model is model
            and not (scorer is not None and (scorer.layers or scorer.adapter))
        )
        self._gen = generator_ctx if use_gen and generator_ctx.top_k is None else None
        read = _reader(model, fmt, scorer, capture)
        super().__init__(f"{model.path.stem}:{fmt.name}", model, fmt, ctx, read)

    @property
    def feature_layers(self) -> tuple[int, ...]:
        """The middle layers whose hidden states follow the logits in `features` (none without
        a capture)."""
        return tuple(self.ctx.capture.layers) if self.ctx.capture else ()

    def features(self, requests: Sequence[ScoreRequest], tokens: np.ndarray) -> list[np.ndarray]:
        """The logits of `tokens` at each requested step's last token, [len(need), len(tokens)] per
        request: what a value head reads (its training features). Needs the head format, so the
        prompt is the head's. With a layer capture each row goes on with the captured layers' hidden
        states at that token, flattened: [len(need), len(tokens) + len(capture.layers) * n_embd]."""
        if self.fmt.name != "head":
            raise ConfigError("value-head features need the head PRM format")
        capture = self.ctx.capture

        def read(row: np.ndarray) -> np.ndarray:
            return head_features(row, tokens, capture.current() if capture else None)

        return [np.stack(r.scores) for r in self._in_parts(requests, read)]
