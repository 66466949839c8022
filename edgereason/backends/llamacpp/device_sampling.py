"""Device-side sampling: llama.cpp's backend samplers cut each output row to its top-k candidates
inside the forward pass, so a row costs k ids and k logits to read instead of the whole vocabulary
(152k floats for Qwen; docs/results.md, "Where a GPU pass's time goes"). The host still draws, from
the engine's per-node random streams, over those k candidates
(edgereason.backends.host_sampling.sample_rows): deduplication's several draws per row, replay after
eviction and batch independence hold as with host sampling.

What the cut drops: the probability mass outside the k best tokens, renormalised away
(`benchmarks/device_sampling.py` measures it: docs/engine.md gives the figures).
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import llama_cpp.llama_cpp as L
import numpy as np

from edgereason.errors import EdgeReasonError


class Candidates(NamedTuple):
    """One output row cut on the device: ids [k] int32 in no particular order, logits [k] float32
    (raw, before temperature). Both are copies: they stay valid after the next forward pass."""

    ids: np.ndarray
    logits: np.ndarray


class TopKSamplers:
    """One sampler chain holding one top-k sampler for each sequence id of a context.

    Rules: attach() before llama_init_from_model (llama.cpp builds the samplers into the graph it
    reserves); free() only after llama_free, since the context uses the chains until then. No
    temperature on the device: for any positive temperature the top k tokens are the k largest
    logits, so requests with different temperatures share one graph and the host applies each one's
    temperature to the k logits. llama.cpp lets a sampled sequence own at most one output row per
    pass (n_outputs_max_per_seq = 1, the default), which is what the generator asks for: one row per
    sequence, at its last token."""

    def __init__(self, k: int, n_seq_max: int) -> None:
        self.k = k
        self._chains = []
        self._configs = (L.llama_sampler_seq_config * n_seq_max)()
        for seq in range(n_seq_max):
            chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
            # the chain owns the top-k sampler
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_k(k))
            self._chains.append(chain)
            self._configs[seq].seq_id = seq
            self._configs[seq].sampler = ctypes.cast(chain, ctypes.c_void_p)

    def attach(self, params: L.llama_context_params) -> None:
        params.samplers = self._configs
        params.n_samplers = len(self._chains)

    def read(self, ctx: L.llama_context_p, rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the last batch (their indices in the batch, as llama_get_logits_ith takes them)
        -> ids [R, k] int32 and logits [R, k] float32, fresh arrays. One memmove per row and array:
        numpy views of ctypes pointers would cost a noticeable part of a GPU pass (docs/results.md,
        "Where a GPU pass's time goes")."""
        ids = np.empty((len(rows), self.k), dtype=np.int32)
        logits = np.empty((len(rows), self.k), dtype=np.float32)
        ids_at, logits_at, size = ids.ctypes.data, logits.ctypes.data, 4 * self.k
        for r, i in enumerate(rows):
            n = L.llama_get_sampled_candidates_count_ith(ctx, i)
            if n != self.k or L.llama_get_sampled_logits_count_ith(ctx, i) != n:
                raise EdgeReasonError(
                    f"llama.cpp sampled {n} candidates for output row {i}, not the top {self.k}"
                )
            ctypes.memmove(ids_at + r * size, L.llama_get_sampled_candidates_ith(ctx, i), size)
            ctypes.memmove(logits_at + r * size, L.llama_get_sampled_logits_ith(ctx, i), size)
        return ids, logits

    def free(self) -> None:
        for chain in self._chains:
            L.llama_sampler_free(chain)
        self._chains = []
