"""An `hf:` PRM as `memory-profile` measures it (protocols.ProfiledPRM). It runs on torch on the
profiled device (the profiler places it on CUDA for `--device gpu`, on the CPU for `--device cpu`),
so the split covers its KV and its weights as they load there (bf16 on a GPU, fp32 on the CPU). It
is opened once: the prefill passes and the sample search share it (the passes hold nothing and
leave its stats alone)."""

from __future__ import annotations

import time
from pathlib import Path

from edgereason.backends.throughput import FILLER, best_rates, prefill_rows
from edgereason.heads.value_head import ValueHead
from edgereason.protocols import ProfiledPRM


def profiled_prm(
    path: Path, fmt: str, head: ValueHead | None, device: str, kv_tokens: int, n_threads: int | None
) -> ProfiledPRM:
    """Opened on `device` with room for `kv_tokens` (the sample search's)."""
    # the package imports this module
    from edgereason.backends.transformers import open_verifier, weights_bytes

    verifier = open_verifier(path, fmt, kv_tokens, device=device, head=head, n_threads=n_threads)
    filler = verifier.tokens.encode(FILLER)

    def one_call(b: int) -> float:
        rows = prefill_rows(filler, b)
        t0 = time.perf_counter()
        verifier.prefill_pass(rows)
        return time.perf_counter() - t0

    return ProfiledPRM(
        verifier.kv_bytes_per_token,
        weights_bytes(path, device),
        lambda _kv: verifier,
        lambda q: len(verifier.tokens.head(q)),
        lambda points, reps, _threads, progress: best_rates(one_call, points, reps, progress),
    )
