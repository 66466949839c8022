"""What memory the device has: host RAM through psutil (CPU), the first GPU through NVML
(nvidia-ml-py).

The device id names a profile file, so it must be stable across runs and safe in a file name.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from pathlib import Path

import psutil

from edgereason.errors import ConfigError

DEVICE_KINDS = ("cpu", "gpu")
# `--kv-budget auto` leaves this much of the free memory (and at least AUTO_MARGIN_MIN)
AUTO_MARGIN_FRACTION = 0.10
AUTO_MARGIN_MIN = 256 << 20
AUTO_MAX_TOKENS = 65536  # per model: more KV than a search here ever holds


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "gpu"
    device_id: str  # e.g. "cpu-amd-epyc-2c", "gpu-nvidia-h200"
    name: str
    total_bytes: int
    free_bytes: int


def slug(text: str) -> str:
    """Lower-case letters, digits, dots and dashes only: usable in a file name on every OS."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine() or "cpu"


def _short_cpu_name(model: str) -> str:
    """'AMD EPYC 7763 64-Core Processor' -> 'amd-epyc-7763': drop the marketing tail, keep vendor
    and family."""
    model = re.sub(r"\(r\)|\(tm\)|\bcpu\b|\bprocessor\b|@.*$|\d+-core.*$", " ", model, flags=re.I)
    return slug(model)


def read_cpu() -> DeviceInfo:
    cores = psutil.cpu_count(logical=False) or psutil.cpu_count() or 1
    vm = psutil.virtual_memory()
    model = _cpu_model()
    return DeviceInfo(
        "cpu", f"cpu-{_short_cpu_name(model)}-{cores}c", model, vm.total, vm.available
    )


def read_gpu(index: int = 0) -> DeviceInfo:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as e:  # ImportError, or NVMLError when there is no driver
        raise ConfigError(
            f"--device gpu needs an NVIDIA GPU and driver, and NVML could not start ({e}); use "
            "--device cpu"
        ) from None
    try:
        if pynvml.nvmlDeviceGetCount() <= index:
            raise ConfigError("NVML found no NVIDIA GPU; use --device cpu")
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return DeviceInfo("gpu", f"gpu-{slug(name)}", name, int(mem.total), int(mem.free))
    finally:
        pynvml.nvmlShutdown()


def read_device(kind: str) -> DeviceInfo:
    if kind not in DEVICE_KINDS:
        raise ConfigError(f"unknown device {kind!r}; choose cpu or gpu")
    return read_gpu() if kind == "gpu" else read_cpu()


def default_device_id(kind: str = "cpu") -> str:
    """The id start-up looks profiles up by: "cpu" unless the models are offloaded to a GPU."""
    return read_device(kind).device_id


def auto_budget(
    free_bytes: int, weights: int, gen_bytes_per_token: int, ver_bytes_per_token: int
) -> int:
    """`--kv-budget auto`: free memory after the weights, less a safety margin, capped at what both
    could use."""
    after_weights = free_bytes - weights
    budget = after_weights - max(int(AUTO_MARGIN_FRACTION * after_weights), AUTO_MARGIN_MIN)
    cap = AUTO_MAX_TOKENS * (gen_bytes_per_token + ver_bytes_per_token)
    if budget <= 0:
        raise ConfigError(
            f"no memory left for KV caches: {free_bytes >> 20} MiB free, weights take "
            f"{weights >> 20} MiB; close other programs or give --kv-budget"
        )
    return min(budget, cap)
