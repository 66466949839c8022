"""benchmarks/kernel_count.py, the kernels a layer of a torch decode pass launches on a GPU, for
each decode attention: here, where there is no GPU, it says in one line that it needs CUDA; on CUDA
it counts SmolLM2's, and the paged kernel launches fewer a layer than the gathered SDPA."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
CUDA = torch.cuda.is_available()


@pytest.mark.skipif(CUDA, reason="the message of a machine without CUDA")
def test_without_cuda_it_says_it_needs_cuda():
    proc = subprocess.run(
        [sys.executable, "benchmarks/kernel_count.py", "--model", "smollm2-135m"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == "kernel_count.py counts the kernels a GPU runs: it needs CUDA"


@pytest.mark.skipif(not CUDA, reason="counts a GPU's kernels")
def test_cuda_paged_attention_launches_fewer_kernels_a_layer(smollm2_path, monkeypatch):
    from benchmarks import kernel_count

    # count() sets both for its process: put back after the test
    monkeypatch.setenv("EDGEREASON_ATTENTION", "sdpa-gathered")
    monkeypatch.setenv("EDGEREASON_COMPILE", "0")

    gathered = kernel_count.count("smollm2-135m", 8, "sdpa-gathered", compiled=False)
    paged = kernel_count.count("smollm2-135m", 8, "triton-paged", compiled=False)
    assert paged["per_layer"] < gathered["per_layer"], (paged, gathered)
    assert any("_split_kernel" in name for name in paged["layer_kernels"]), paged
    assert paged["outside_layers"] <= gathered["outside_layers"]
