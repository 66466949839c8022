"""What one engine did, summed over its life: the bench reads this record instead of timing the
models."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EngineStats:
    passes: int = 0  # generator forward passes (one `Generator.step` each)
    rows: int = 0  # sequences sampled from, summed over passes
    gen_s: float = 0.0  # wall time inside `Generator.step`
    prm_s: float = 0.0  # wall time inside `Verifier.score`
    prm_rebuilt_tokens: int = 0  # PRM tokens evaluated again because a held prefix had been dropped
    prm_batches: list[int] = field(default_factory=list)  # score requests per PRM call

    @property
    def prm_calls(self) -> int:
        return len(self.prm_batches)

    def gen_pass(self, rows: int, seconds: float) -> None:
        self.passes += 1
        self.rows += rows
        self.gen_s += seconds

    def prm_call(self, requests: int, seconds: float, rebuilt_tokens: int) -> None:
        self.prm_batches.append(requests)
        self.prm_s += seconds
        self.prm_rebuilt_tokens += rebuilt_tokens
