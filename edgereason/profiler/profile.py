"""A memory profile: the device, the backend that ran the models, both models' KV costs, weights and
throughput curves, the modelled search and the split chosen for it, as `memory-profile` saves it."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

from edgereason.memory.curve import Curve
from edgereason.memory.device import DeviceInfo
from edgereason.memory.split import SplitPlan, Workload

PROFILE_VERSION = 1


@dataclass(frozen=True)
class Profile:
    device: DeviceInfo
    # the generator's (and the PRM's, unless an hf: one on transformers): llamacpp or torch
    backend: str
    generator: str
    verifier: str
    threads: int
    budget_bytes: int
    gen_bytes_per_token: int
    ver_bytes_per_token: int
    gen_weights_bytes: int  # on the device, as the backend loads them
    ver_weights_bytes: int  # 0 where the generator's weights serve both
    workload: Workload
    gen_curve: Curve
    ver_curve: Curve
    plan: SplitPlan

    @property
    def lv_threshold_tokens(self) -> int:
        """Lazy verification flushes at the batch where PRM prefill reaches 90% of its best
        throughput."""
        return self.ver_curve.saturation(0.9)

    def to_dict(self) -> dict:
        best, w = self.plan.best, self.workload
        return {
            "version": PROFILE_VERSION,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "device": self.device.device_id,
            "device_name": self.device.name,
            "device_memory_bytes": self.device.total_bytes,
            "backend": self.backend,
            "generator": self.generator,
            "verifier": self.verifier,
            "threads": self.threads,
            "budget_bytes": self.budget_bytes,
            "generator_kv_tokens": best.generator_kv_tokens,
            "verifier_kv_tokens": best.verifier_kv_tokens,
            "generator_kv_bytes": best.generator_kv_tokens * self.gen_bytes_per_token,
            "verifier_kv_bytes": best.verifier_kv_tokens * self.ver_bytes_per_token,
            "generator_kv_bytes_per_token": self.gen_bytes_per_token,
            "verifier_kv_bytes_per_token": self.ver_bytes_per_token,
            "generator_weights_bytes": self.gen_weights_bytes,
            "verifier_weights_bytes": self.ver_weights_bytes,
            "lv_threshold_tokens": self.lv_threshold_tokens,
            "curves": {"generator": self.gen_curve.as_list(), "verifier": self.ver_curve.as_list()},
            "workload": asdict(w),
            "predicted": {
                "best": best.to_dict(w),
                "even": self.plan.even.to_dict(w),
                "speedup_vs_even": _round(self.plan.speedup_vs_even),
            },
            "splits": [row.to_dict(w) for row in self.plan.rows],
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
