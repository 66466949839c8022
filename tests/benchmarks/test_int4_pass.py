"""benchmarks/int4_pass.py, the GPU's int4-against-bf16 timing, run here on the CPU on one layer of
SmolLM2 (its Q4_1 matrices exact, its Q8_0 embedding requantized as the head): every variant checks
its products and times its pass, and the bytes a pass reads come from the tensor table."""

from __future__ import annotations

import json
import sys

from benchmarks import int4_pass


def test_help_runs_from_the_repository_root(script_help):
    assert "--variants" in script_help("int4_pass.py")


def test_a_cpu_smoke_run(smollm2_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))  # the bf16 copy it keeps goes here
    argv = ["int4_pass.py", "--model", str(smollm2_path), "--layers", "1", "--rows", "1,2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--steps", "1", "--warmup", "0"])
    int4_pass.main()
    out = json.loads(capsys.readouterr().out)
    layer = 576 * 576 * 2 + 192 * 576 * 2 + 576 * 1536 * 3  # q, o; k, v; gate, up, down
    head = 49152 * 576  # the tied embedding
    assert out["pass_bytes"]["bf16"] == 2 * (30 * layer + head)
    assert out["pass_bytes"]["int4_head"] == 0.625 * (30 * layer + head)
    assert out["bf16"]["bytes_read"] == 2 * (layer + head)
    assert out["int4"]["bytes_read"] == 0.625 * layer + 2 * head
    assert out["int4_exact"]["bytes_read"] == out["int4"]["bytes_read"]  # all Q4_1: all exact
    for variant in int4_pass.VARIANTS:
        assert set(out[variant]["ms"]) == {"1", "2"} and min(out[variant]["ms"].values()) > 0
    assert out["bf16"]["layout_error"] is None
    assert all(out[v]["layout_error"] < 1e-2 for v in ("int4_exact", "int4", "int4_head"))
    assert out["int4"]["requantized_error"] == {}
    assert 0.02 < out["int4_head"]["requantized_error"]["token_embd.weight"] < 0.1
