"""Choosing how one KV budget is split between the generator and the PRM (design.md section 4, asymmetric split).

Workload model: one step of a beam search with N beams. The generator decodes S tokens (the mean step length) for
each of N sequences, each holding a path of L_g = prompt + depth * S tokens; the PRM then verifies N steps of
S + 12 tokens (the turn markup around a step), holding N paths of its own of L_v = prompt + depth * (S + 12).
Prefix sharing between beams is ignored, so the model errs on the side of needing more memory.

Generator with G KV tokens: n = min(N, G // L_g) sequences run at once; the N sequences take w = ceil(N / n)
waves of N / w sequences, so gen_time = N * S / gen_tps(N / w), with gen_tps the measured decode curve.

PRM with P KV tokens: it keeps h <= N paths resident and rebuilds the other N - h from scratch (what the
llama.cpp verifier does when memory is short), so one step prefills T = h * (S + 12) + (N - h) * L_v tokens in
calls of at most b = P - h * L_v tokens (a call must fit one whole request: b >= S + 12 if every path is held,
b >= L_v if some are rebuilt; no such h means infeasible). c = ceil(T / b) calls of T / c tokens each give
prm_time = T / prm_tps(T / c); the best h is taken. With h = N this is the plain b = min(N * (S + 12), P - N * L_v).

Predicted step time = gen_time + prm_time (the baseline engine runs them one after the other) and goodput is
N * S / step time. Curves are interpolated linearly (np.interp) and clamped outside their measured range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from edgereason.errors import ConfigError
from edgereason.memory.measure import Curve
from edgereason.memory.size import format_size

MIN_KV_TOKENS = 256  # the smallest KV cache a session accepts per model
SHARES = tuple(round(0.05 * i, 2) for i in range(1, 20))  # generator share of the budget: 5%, 10%, ..., 95%
EVEN = 0.5
TIE = 0.01  # splits predicted within 1% of the best are equal; the one nearest even wins (least surprising)


@dataclass(frozen=True)
class Workload:
    beams: int = 4
    step_tokens: int = 64
    prompt_tokens: int = 200
    depth: int = 4  # steps already on a path
    verify_overhead: int = 12  # PRM turn markup around one step

    @property
    def generator_path_tokens(self) -> int:
        return self.prompt_tokens + self.depth * self.step_tokens

    @property
    def verify_tokens(self) -> int:
        return self.step_tokens + self.verify_overhead

    @property
    def verifier_path_tokens(self) -> int:
        return self.prompt_tokens + self.depth * self.verify_tokens

    def min_budget_bytes(self, gen_bytes_per_token: int, ver_bytes_per_token: int) -> int:
        """One generator path and one PRM path (rebuilt every call): less than this runs nothing."""
        return (max(self.generator_path_tokens, MIN_KV_TOKENS) * gen_bytes_per_token
                + max(self.verifier_path_tokens, MIN_KV_TOKENS) * ver_bytes_per_token)


@dataclass(frozen=True)
class Prediction:
    generator_share: float
    generator_kv_tokens: int
    verifier_kv_tokens: int
    concurrent_seqs: int = 0  # generator sequences resident at once (0: infeasible)
    held_paths: int = 0  # PRM paths kept between steps
    verifier_call_tokens: float = 0.0
    gen_time_s: float = math.inf
    prm_time_s: float = math.inf

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.gen_time_s + self.prm_time_s)

    @property
    def step_time_s(self) -> float:
        return self.gen_time_s + self.prm_time_s

    def to_dict(self, workload: Workload) -> dict:
        if not self.feasible:  # infinite times are not JSON
            return {"generator_share": self.generator_share, "generator_kv_tokens": self.generator_kv_tokens,
                    "verifier_kv_tokens": self.verifier_kv_tokens, "feasible": False}
        d = asdict(self) | {"feasible": True, "step_time_s": self.step_time_s,
                            "goodput_tok_s": workload.beams * workload.step_tokens / self.step_time_s}
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


@dataclass(frozen=True)
class SplitPlan:
    rows: tuple[Prediction, ...]
    best: Prediction
    even: Prediction

    @property
    def speedup_vs_even(self) -> float | None:
        """Predicted goodput of the chosen split over the even one (None: the even split cannot run)."""
        return self.even.step_time_s / self.best.step_time_s if self.even.feasible else None


def _gen_time(tokens: int, curve: Curve, w: Workload) -> tuple[int, float]:
    n = min(w.beams, tokens // w.generator_path_tokens)
    if n == 0:
        return 0, math.inf
    waves = math.ceil(w.beams / n)
    return n, w.beams * w.step_tokens / curve.at(w.beams / waves)


def _prm_time(tokens: int, curve: Curve, w: Workload) -> tuple[int, float, float]:
    best = (0, 0.0, math.inf)
    for held in range(w.beams + 1):
        room = tokens - held * w.verifier_path_tokens
        if room < (w.verify_tokens if held == w.beams else w.verifier_path_tokens):
            continue
        total = held * w.verify_tokens + (w.beams - held) * w.verifier_path_tokens
        per_call = total / math.ceil(total / room)
        t = total / curve.at(per_call)
        if t < best[2]:
            best = (held, per_call, t)
    return best


def predict(share: float, gen_tokens: int, ver_tokens: int, gen_curve: Curve, ver_curve: Curve,
            w: Workload) -> Prediction:
    if min(gen_tokens, ver_tokens) < MIN_KV_TOKENS:
        return Prediction(share, gen_tokens, ver_tokens)
    n, gen_time = _gen_time(gen_tokens, gen_curve, w)
    held, per_call, prm_time = _prm_time(ver_tokens, ver_curve, w)
    return Prediction(share, gen_tokens, ver_tokens, n, held, per_call, gen_time, prm_time)


def budget_error(budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, w: Workload) -> ConfigError:
    need = w.min_budget_bytes(gen_bytes_per_token, ver_bytes_per_token)
    return ConfigError(f"a KV budget of {format_size(budget_bytes)} fits no split for {w.beams} beams; the two "
                       f"models need at least {format_size(need)} together (more for a split on the 5% grid): "
                       "raise --budget or lower --beams")


def plan_split(budget_bytes: int, gen_bytes_per_token: int, ver_bytes_per_token: int, gen_curve: Curve,
               ver_curve: Curve, w: Workload, shares: tuple[float, ...] = SHARES) -> SplitPlan:
    """Predict every split in `shares` (plus even) and pick the fastest; ConfigError when none can run."""
    rows = []
    for share in sorted(set(shares) | {EVEN}):
        gen_tokens = int(budget_bytes * share) // gen_bytes_per_token
        ver_tokens = (budget_bytes - gen_tokens * gen_bytes_per_token) // ver_bytes_per_token
        rows.append(predict(share, gen_tokens, ver_tokens, gen_curve, ver_curve, w))
    feasible = [r for r in rows if r.feasible]
    if not feasible:
        raise budget_error(budget_bytes, gen_bytes_per_token, ver_bytes_per_token, w)
    fastest = min(r.step_time_s for r in feasible)
    best = min((r for r in feasible if r.step_time_s <= fastest * (1 + TIE)),
               key=lambda r: (abs(r.generator_share - EVEN), r.step_time_s))
    even = next(r for r in rows if r.generator_share == EVEN)
    return SplitPlan(tuple(rows), best, even)
