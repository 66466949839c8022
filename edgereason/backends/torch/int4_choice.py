"""Which weights the torch backend's layers compute with: `bf16` (float32 on the CPU), or `int4`,
the GGUF's own 4-bit matrices through torch's weight-only int4 matmul (int4_layers.py). Chosen by
--torch-weights (the session's Placement.torch_weights), else EDGEREASON_TORCH_WEIGHTS, which lets a
benchmark run both side by side in one process.

Unset, the default is bf16, but int4 on cards whose memory reads under 1.5 TB/s (`int4_by_default`):
a pass of few rows reads every weight once, so a quarter of the bytes matters most where bytes are
slowest. On an H100 (3.35 TB/s, 2026-12-06, the 1.5B, uncompiled graphs) int4's pass was already
faster at 1 and 8 rows (2.44 / 3.18 ms against bf16's 2.83 / 3.30) and slower at 64 (8.27 against
4.39), so the H100 stays on bf16 and a 1 TB/s consumer card, where bf16's weights alone take 3.1 ms,
runs int4. INT4_RULE_ON turns the rule off (bf16 everywhere)."""

from __future__ import annotations

import os

from edgereason.errors import ConfigError

SWITCH = "EDGEREASON_TORCH_WEIGHTS"
KINDS = ("bf16", "int4")
# int4 measured faster at <= 8 rows on an H100 (issue 63 item 5): the rule is on
INT4_RULE_ON = True
INT4_BELOW_BYTES_PER_S = 1.5e12


def weights_kind(device: str, asked: str | None = None) -> str:
    """bf16 or int4 for a model on `device` (cpu or cuda): `asked` (--torch-weights, the session's
    Placement.torch_weights), else the variable's, else the default."""
    if asked is not None:
        return _checked(asked, "--torch-weights")
    flag = os.environ.get(SWITCH, "").strip()
    return default_kind(device) if flag == "" else _checked(flag, SWITCH)


def _checked(kind: str, source: str) -> str:
    if kind not in KINDS:
        raise ConfigError(
            f"{source}={kind!r}: set it to bf16 or int4 (the torch backend's weights), or unset it"
        )
    return kind


def default_kind(device: str) -> str:
    if not INT4_RULE_ON or device != "cuda":
        return "bf16"
    return "int4" if int4_by_default(memory_bytes_per_s()) else "bf16"


def int4_by_default(bytes_per_s: float | None) -> bool:
    """The rule: int4 on a card whose memory reads under 1.5 TB/s (a consumer card: an RTX 4090's
    1.0 TB/s); bf16 on faster ones (an H100's 3.35 TB/s) and where the speed is unknown."""
    return bytes_per_s is not None and bytes_per_s < INT4_BELOW_BYTES_PER_S


def memory_bytes_per_s() -> float | None:
    """The CUDA card's peak memory bandwidth from its clock and bus width (two transfers a clock),
    None where torch does not report them."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    clock_khz = getattr(props, "memory_clock_rate", 0)
    bus_bits = getattr(props, "memory_bus_width", 0)
    if not clock_khz or not bus_bits:
        return None
    return bandwidth(clock_khz, bus_bits)


def bandwidth(clock_khz: float, bus_bits: int) -> float:
    """Bytes a second of a memory at `clock_khz` on a bus of `bus_bits`, two transfers a clock."""
    return 2 * clock_khz * 1e3 * bus_bits / 8
