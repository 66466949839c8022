"""The torch backend's choice of weights (int4_choice.py): --torch-weights, else the variable
EDGEREASON_TORCH_WEIGHTS, bf16 by default, and the written rule for int4 on cards under 1.5 TB/s."""

from __future__ import annotations

import pytest

from edgereason.backends.torch import int4_choice
from edgereason.errors import ConfigError


def test_the_variable_chooses_and_bf16_is_the_default(monkeypatch):
    monkeypatch.setenv(int4_choice.SWITCH, "")  # unset (and put back after the test)
    monkeypatch.setattr(int4_choice, "memory_bytes_per_s", lambda: 3.35e12)  # an H100
    assert int4_choice.weights_kind("cuda") == "bf16"
    assert int4_choice.weights_kind("cpu") == "bf16"
    assert int4_choice.weights_kind("cuda", None) == "bf16"  # no flag: the variable or the rule
    assert int4_choice.weights_kind("cpu", "int4") == "int4"  # the flag
    monkeypatch.setenv(int4_choice.SWITCH, " int4 ")
    assert int4_choice.weights_kind("cuda") == "int4"
    assert int4_choice.weights_kind("cuda", "bf16") == "bf16"  # the flag over the variable


def test_a_wrong_value_is_one_config_error(monkeypatch):
    monkeypatch.setenv(int4_choice.SWITCH, "int8")
    with pytest.raises(ConfigError, match="WEIGHTS='int8': set it to bf16 or int4"):
        int4_choice.weights_kind("cuda")
    with pytest.raises(ConfigError, match="--torch-weights='int8'"):
        int4_choice.weights_kind("cuda", "int8")


def test_the_rule_takes_int4_under_1_5_tb_per_s():
    h100 = int4_choice.bandwidth(2_619_000, 5120)  # HBM3: 2619 MHz, 5120 bits
    rtx4090 = int4_choice.bandwidth(10_501_000, 384)  # GDDR6X as the driver reports it
    assert h100 == pytest.approx(3.35e12, rel=0.01)
    assert rtx4090 == pytest.approx(1.008e12, rel=0.01)
    assert [int4_choice.int4_by_default(b) for b in (h100, rtx4090, None)] == [False, True, False]


def test_the_rule_picks_int4_on_a_slow_card_only(monkeypatch):
    monkeypatch.setenv(int4_choice.SWITCH, "")  # unset (and put back after the test)
    monkeypatch.setattr(int4_choice, "memory_bytes_per_s", lambda: 1.0e12)
    assert int4_choice.INT4_RULE_ON
    assert int4_choice.weights_kind("cuda") == "int4"
    assert int4_choice.default_kind("cpu") == "bf16"  # a CPU's tests and small models stay as read
    monkeypatch.setattr(int4_choice, "memory_bytes_per_s", lambda: 3.35e12)
    assert int4_choice.default_kind("cuda") == "bf16"
    monkeypatch.setattr(int4_choice, "memory_bytes_per_s", lambda: 1.0e12)
    monkeypatch.setattr(int4_choice, "INT4_RULE_ON", False)
    assert int4_choice.default_kind("cuda") == "bf16"
