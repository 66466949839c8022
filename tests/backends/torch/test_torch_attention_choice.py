"""Which decode attention runs (attention_choice.py): detection, the EDGEREASON_ATTENTION switch,
its one-line errors and notes, and what the installed torch offers for paged attention."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from edgereason.backends.torch import attention_choice
from edgereason.backends.torch.attention_choice import GATHERED, PAGED, SWITCH, decode_kind
from edgereason.errors import ConfigError

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
TRITON = importlib.util.find_spec("triton") is not None


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.setattr(attention_choice, "_noted", set())


def test_a_cpu_attends_gathered_by_default(monkeypatch):
    """Triton's interpreter serves the tests only: a CPU's passes run the gathered SDPA."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert decode_kind(CPU, 64) == GATHERED


@pytest.mark.skipif(not TRITON, reason="the paged kernel needs Triton")
def test_cuda_with_triton_attends_paged():
    assert decode_kind(CUDA, 128) == PAGED
    # a head size the kernel does not take
    assert decode_kind(CUDA, 80) == GATHERED


def test_the_switch_forces_the_gathered_sdpa(monkeypatch):
    monkeypatch.setenv(SWITCH, GATHERED)
    assert decode_kind(CUDA, 128) == GATHERED


def test_an_unknown_name_is_one_line_naming_the_kinds(monkeypatch):
    monkeypatch.setenv(SWITCH, "flash-varlen")
    with pytest.raises(
        ConfigError, match=r"EDGEREASON_ATTENTION='flash-varlen': set it to one of "
    ):
        decode_kind(CUDA, 128)


def test_a_forced_kind_that_cannot_run_falls_back_after_one_line(monkeypatch, capsys):
    monkeypatch.setenv(SWITCH, PAGED)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert decode_kind(CPU, 64) == GATHERED
    assert decode_kind(CPU, 64) == GATHERED
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
