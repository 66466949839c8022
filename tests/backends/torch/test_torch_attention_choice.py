"""Which decode attention runs (attention_choice.py): detection, the EDGEREASON_ATTENTION switch,
the paged kernel's check before its first use (paged_decode.probe), the one-line errors and notes,
and what the installed torch offers for paged attention."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from edgereason.backends.torch import attention_choice, paged_decode
from edgereason.backends.torch.attention_choice import GATHERED, PAGED, SWITCH, decode_kind
from edgereason.backends.torch.one_search import one_search_a_process
from edgereason.errors import ConfigError

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
TRITON = importlib.util.find_spec("triton") is not None
QWEN_1_5B = SimpleNamespace(n_head=12, n_head_kv=2, head_dim=128)
SMOLLM2 = SimpleNamespace(n_head=9, n_head_kv=3, head_dim=64)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.setattr(attention_choice, "_noted", set())
    monkeypatch.setattr(attention_choice, "_probed", {})
    if not torch.cuda.is_available():  # the check needs the GPU it checks: here, it passes
        monkeypatch.setattr(paged_decode, "probe", lambda *_: "")


def test_a_cpu_attends_gathered_by_default(monkeypatch):
    """Triton's interpreter serves the tests only: a CPU's passes run the gathered SDPA."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert decode_kind(CPU, SMOLLM2, torch.float32) == GATHERED


@pytest.mark.skipif(not TRITON, reason="the paged kernel needs Triton")
def test_cuda_with_triton_attends_paged():
    assert decode_kind(CUDA, QWEN_1_5B, torch.bfloat16) == PAGED
    # a head size the kernel does not take
    odd = SimpleNamespace(n_head=12, n_head_kv=2, head_dim=80)
    assert decode_kind(CUDA, odd, torch.bfloat16) == GATHERED


def test_the_switch_forces_the_gathered_sdpa(monkeypatch):
    monkeypatch.setenv(SWITCH, GATHERED)
    assert decode_kind(CUDA, QWEN_1_5B, torch.bfloat16) == GATHERED


def test_an_unknown_name_is_one_line_naming_the_kinds(monkeypatch):
    monkeypatch.setenv(SWITCH, "flash-varlen")
    with pytest.raises(
        ConfigError, match=r"EDGEREASON_ATTENTION='flash-varlen': set it to one of "
    ):
        decode_kind(CUDA, QWEN_1_5B, torch.bfloat16)


def test_a_forced_kind_that_cannot_run_falls_back_after_one_line(monkeypatch, capsys):
    monkeypatch.setenv(SWITCH, PAGED)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert decode_kind(CPU, SMOLLM2, torch.float32) == GATHERED
    assert decode_kind(CPU, SMOLLM2, torch.float32) == GATHERED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "triton-paged cannot run here" in err
    assert ("needs CUDA" if TRITON else "Triton is not installed") in err


def test_the_installed_torch_is_described():
    """torch 2.13's varlen_attn takes block_table and seqused_k; the flash op's schema says so too
    (pages of 256 tokens: no kind of this cache's one-token pages)."""
    about = attention_choice.installed_torch()
    assert about["torch"] == torch.__version__
    assert "seqused_k" in about["flash_attention_forward"]
    if "block_table" in about["varlen_attn"]:
        assert "block_table" in about["flash_attention_forward"]


@pytest.mark.skipif(not TRITON, reason="the paged kernel needs Triton")
def test_a_kernel_that_fails_its_check_is_said_once_and_the_gathered_sdpa_runs(monkeypatch, capsys):
    checks = []
    monkeypatch.setattr(
        paged_decode, "probe", lambda *key: checks.append(key) or "RuntimeError: no kernel image"
    )
    for _ in range(3):
        assert decode_kind(CUDA, QWEN_1_5B, torch.bfloat16) == GATHERED
    assert len(checks) == 1  # once a process and shape
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "triton-paged cannot run here (RuntimeError: no kernel image)" in err
    )


@pytest.mark.skipif(not TRITON, reason="the paged kernel needs Triton")
def test_the_check_passes_the_kernel_and_catches_a_wrong_one(monkeypatch):
    """The real check (on CUDA, or in Triton's interpreter here) passes the kernel in the model's
    dtype; a kernel that computes wrong, or raises, fails it with the reason."""
    from edgereason.backends.torch import paged_decode_kernel

    monkeypatch.undo()  # the real probe
    device = CUDA if torch.cuda.is_available() else CPU
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    assert paged_decode.probe(device, 12, 2, 128, dtype) == ""
    monkeypatch.setattr(paged_decode_kernel, "paged_decode", lambda q, *_: torch.zeros_like(q))
    assert paged_decode.probe(device, 9, 3, 64, dtype).startswith("its attention is ")

    def broken(*_):
        raise RuntimeError("PTX not supported\nmore")

    monkeypatch.setattr(paged_decode_kernel, "paged_decode", broken)
    assert paged_decode.probe(device, 9, 3, 64, dtype) == "RuntimeError: PTX not supported"


@pytest.mark.skipif(not TRITON, reason="the paged kernel needs Triton")
def test_one_search_a_process_attends_gathered_unless_told(monkeypatch):
    """`solve` (one search a process): gathered on CUDA too, its graphs far cheaper to capture than
    the paged kernel's (one_search.py); a variable the user set stands."""
    one_search_a_process()
    assert decode_kind(CUDA, QWEN_1_5B, torch.bfloat16) == GATHERED
    monkeypatch.setenv(SWITCH, PAGED)
    one_search_a_process()
    assert decode_kind(CUDA, QWEN_1_5B, torch.bfloat16) == PAGED
