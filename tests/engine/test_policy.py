"""Policy presets, `PRESET:key=value` strings and the per-switch CLI flags."""

from __future__ import annotations

import pytest

from edgereason.cli.flags_search import policy_from
from edgereason.cli.main import build_parser
from edgereason.engine.policy import PRESETS, parse_policy
from edgereason.errors import ConfigError


def test_presets_combine_the_techniques():
    assert not any(v for k, v in PRESETS["baseline"].switches().items() if isinstance(v, bool))
    assert PRESETS["naive-spec"].async_expand and not PRESETS["naive-spec"].dedup
    assert PRESETS["fasttts"].speculative_extension and PRESETS["fasttts"].lookahead
    s = PRESETS["specscale"]
    assert (
        s.async_expand
        and s.early_prune_rank
        and s.early_prune_perfect
        and s.dedup
        and s.lazy_verify
    )


def test_overrides_in_the_policy_string():
    p = parse_policy("edge:order=fifo:lv_threshold=128:dedup=false")
    assert (p.order, p.lv_threshold, p.dedup, p.name) == (
        "fifo",
        128,
        False,
        "edge:order=fifo:lv_threshold=128:dedup=false",
    )
    assert parse_policy("edge:spec_slots=2").spec_slots == 2.0
    for bad in (
        "nope",
        "edge:order",
        "edge:warp=1",
        "edge:dedup=maybe",
        "edge:order=random",
        "baseline:lookahead=true",
        "edge:spec_slots=-1",
        "edge:spec_slots=inf",
        "edge:spec_slots=nan",
    ):
        with pytest.raises(ConfigError):
            parse_policy(bad)


def test_one_flag_per_switch():
    args = build_parser().parse_args(
        [
            "solve",
            "x",
            "--policy",
            "specscale",
            "--no-lazy-verify",
            "--perfect-score",
            "0.9",
            "--order",
            "fifo",
        ]
    )
    p = policy_from(args)
    assert (p.lazy_verify, p.perfect_score, p.order, p.dedup) == (False, 0.9, "fifo", True)
    bench = build_parser().parse_args(
        ["bench", "--dataset", "d", "--out", "o", "--speculative-extension"]
    )
    assert policy_from(bench, "baseline").speculative_extension
