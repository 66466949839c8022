"""GPU defaults: all layers where a CUDA build sees a GPU, and the --gpu-memory cap (weights +
KV)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from edgereason.backends import Placement, load_backend
from edgereason.errors import ConfigError
from edgereason.memory.device import AUTO_MARGIN_MIN, AUTO_MAX_TOKENS
from edgereason.session import gpu
from edgereason.session.opening import open_session
from edgereason.session.settings import ModelSettings

GiB = 1 << 30
ON_GPU = load_backend("llamacpp").supports_gpu() and gpu.gpu_present()
cpu_machine = pytest.mark.skipif(
    ON_GPU, reason="this machine has a CUDA build and a GPU: the CPU defaults do not apply"
)
gpu_machine = pytest.mark.skipif(
    not ON_GPU, reason="needs a CUDA build of llama-cpp-python and an NVIDIA GPU"
)


def _runtime(can_offload: bool) -> SimpleNamespace:
    """The backend facts gpu_settings reads, as a CUDA (or CPU) llama.cpp build on a GPU machine
    gives them."""
    return SimpleNamespace(
        supports_gpu=lambda: can_offload,
        kv_bytes_per_token=lambda path, place: 12288,
        weights_bytes=lambda path, place: path.stat().st_size,  # the GGUF as the file holds it
    )


@cpu_machine
def test_this_cpu_machine_keeps_layers_on_the_cpu(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    session = open_session(
        ModelSettings(model=str(smollm2_path), generator_kv_tokens=512, verifier_kv_tokens=512)
    )
    try:
        assert session.settings.n_gpu_layers == 0
        # device sampling auto: off without layers on a GPU
        assert session.generator.device_top_k == 0
    finally:
        session.close()


@cpu_machine
def test_gpu_memory_without_a_gpu_is_an_error(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    with pytest.raises(
        ConfigError, match="--gpu-memory caps GPU memory, but no layers are on a GPU"
    ):
        open_session(ModelSettings(model=str(smollm2_path), gpu_memory_bytes=24 * GiB))


@gpu_machine
def test_this_gpu_machine_puts_every_layer_on_the_gpu_and_samples_there(
    smollm2_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("EDGEREASON_HOME", str(tmp_path))
    session = open_session(
        ModelSettings(
            model=str(smollm2_path),
            generator_kv_tokens=512,
            verifier_kv_tokens=512,
            gpu_memory_bytes=24 * GiB,
        )
    )
    try:
        assert session.settings.n_gpu_layers == gpu.ALL_LAYERS
        # device sampling auto: on with every layer on the GPU
        assert session.generator.device_top_k > 0
    finally:
        session.close()


def test_a_cuda_build_with_a_gpu_defaults_to_all_layers(smollm2_path, monkeypatch):
    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    settings = gpu.gpu_settings(ModelSettings(), _runtime(True), smollm2_path, smollm2_path)
    assert settings.n_gpu_layers == gpu.ALL_LAYERS and settings.kv_budget_bytes is None
    assert (
        gpu.gpu_settings(ModelSettings(), _runtime(False), smollm2_path, smollm2_path).n_gpu_layers
        == 0
    )
    assert (
        gpu.gpu_settings(
            ModelSettings(n_gpu_layers=4), _runtime(True), smollm2_path, smollm2_path
        ).n_gpu_layers
        == 4
    )


def test_the_cap_gives_the_kv_what_the_weights_leave(smollm2_path, monkeypatch):
    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    weights = smollm2_path.stat().st_size  # one file serves both roles: counted once
    cap = weights + 2 * AUTO_MARGIN_MIN
    settings = gpu.gpu_settings(
        ModelSettings(gpu_memory_bytes=cap), _runtime(True), smollm2_path, smollm2_path
    )
    assert settings.kv_budget_bytes == 2 * AUTO_MARGIN_MIN - AUTO_MARGIN_MIN
    big = gpu.gpu_settings(
        ModelSettings(gpu_memory_bytes=24 * GiB), _runtime(True), smollm2_path, smollm2_path
    )
    assert big.kv_budget_bytes == AUTO_MAX_TOKENS * 2 * 12288  # no more than a search here holds
    with pytest.raises(ConfigError, match="leaves no room for KV"):
        gpu.gpu_settings(
            ModelSettings(gpu_memory_bytes=weights), _runtime(True), smollm2_path, smollm2_path
        )
    with pytest.raises(ConfigError, match="exceed --gpu-memory"):
        gpu.gpu_settings(
            ModelSettings(gpu_memory_bytes=cap, kv_budget_bytes=cap),
            _runtime(True),
            smollm2_path,
            smollm2_path,
        )


def test_llamacpp_weights_are_its_files(smollm2_path):
    """What the cap counts for a llama.cpp model: its GGUF's size, on the GPU too (one file serving
    both roles counts once: the test above)."""
    on_gpu = Placement(n_gpu_layers=gpu.ALL_LAYERS)
    size = load_backend("llamacpp").weights_bytes(smollm2_path, on_gpu)
    assert size == smollm2_path.stat().st_size


def _torch_prm(on_cuda: bool) -> SimpleNamespace:
    """The transformers backend's facts gpu_settings reads for an hf: PRM: 1 GiB of bf16 weights, 4
    KiB per token."""
    return SimpleNamespace(
        on_gpu=lambda place: on_cuda,
        weights_bytes=lambda path, place: GiB,
        kv_bytes_per_token=lambda path, place: 4096,
    )


def test_the_cap_counts_an_hf_prms_torch_weights_and_kv(smollm2_path, tiny_hf_path, monkeypatch):
    monkeypatch.setattr(gpu, "gpu_present", lambda: True)
    # the generator's GGUF and the PRM as torch loads it
    weights = smollm2_path.stat().st_size + GiB
    cap = weights + 2 * AUTO_MARGIN_MIN
    settings = gpu.gpu_settings(
        ModelSettings(gpu_memory_bytes=cap),
        _runtime(True),
        smollm2_path,
        tiny_hf_path,
        _torch_prm(True),
    )
    assert settings.kv_budget_bytes == AUTO_MARGIN_MIN
    big = gpu.gpu_settings(
        ModelSettings(gpu_memory_bytes=24 * GiB),
        _runtime(True),
        smollm2_path,
        tiny_hf_path,
        _torch_prm(True),
    )
    assert big.kv_budget_bytes == AUTO_MAX_TOKENS * (12288 + 4096)  # the PRM's own bytes per token
    with pytest.raises(ConfigError, match="leaves no room for KV"):
        gpu.gpu_settings(
            ModelSettings(gpu_memory_bytes=weights),
            _runtime(True),
            smollm2_path,
            tiny_hf_path,
            _torch_prm(True),
        )
    with pytest.raises(ConfigError, match="the hf: PRM runs on the CPU"):
        gpu.gpu_settings(
            ModelSettings(gpu_memory_bytes=cap, prm_device="cpu"),
            _runtime(True),
            smollm2_path,
            tiny_hf_path,
            _torch_prm(False),
        )


def test_place_models_decides_the_layers_once_and_places_both_models_there(smollm2_path):
    asked = ModelSettings(threads=2, device_sampling="on", device_top_k=50)
    settings, place = gpu.place_models(asked, _runtime(False), smollm2_path, smollm2_path)
    assert settings.n_gpu_layers == place.n_gpu_layers == 0
    assert (place.n_threads, place.device_top_k, place.flash_attn) == (2, 50, True)


def test_place_models_refuses_layers_this_build_cannot_offload(smollm2_path):
    llamacpp = load_backend("llamacpp")
    if llamacpp.supports_gpu():
        pytest.skip("this llama-cpp-python build offloads")
    with pytest.raises(ConfigError, match="drop --gpu-layers"):
        gpu.place_models(ModelSettings(n_gpu_layers=4), llamacpp, smollm2_path, smollm2_path)
