"""The set-up's first steps, one way for every session (opening.py's choose_models): the PRM, the
models' files and the backend, decided once; a served setup asks its servers before any pull."""

from __future__ import annotations

import pytest

from edgereason.backends import Endpoint, RemoteSettings
from edgereason.errors import EdgeReasonError
from edgereason.session import backend_choice
from edgereason.session.opening import choose_models
from edgereason.session.settings import ModelSettings

DOWN = Endpoint("http://127.0.0.1:9", retries=0, connect_timeout_s=1.0)  # nothing listens there


def test_a_cpu_session_decides_its_backend_and_files_once(smollm2_path):
    chosen = choose_models(ModelSettings(model=str(smollm2_path), n_gpu_layers=0), None)
    assert chosen.backend == "llamacpp" and chosen.runtime.capabilities.profiles
    assert chosen.prm_runtime is chosen.runtime and not chosen.prm_on_transformers
    assert chosen.gen_path == chosen.prm.path == smollm2_path
    assert chosen.settings.prm_format == chosen.prm.format == "judge"


def test_a_served_generator_runs_on_remote_and_a_served_prm_alone_beside_llamacpp(smollm2_path):
    served = RemoteSettings(generator=(DOWN,))
    prm_only = RemoteSettings(prm=(DOWN,))
    for remote, backend in ((served, "remote"), (prm_only, "llamacpp")):
        settings = ModelSettings(model=str(smollm2_path), remote=remote)
        assert backend_choice.choose_backend(settings, smollm2_path, smollm2_path, False) == backend


def test_a_served_setup_asks_its_servers_before_any_pull(smollm2_path, monkeypatch):
    def pull(*_: object) -> None:
        pytest.fail("the models' files were pulled before the servers were asked")

    monkeypatch.setattr(backend_choice, "model_paths", pull)
    settings = ModelSettings(model=str(smollm2_path), remote=RemoteSettings(generator=(DOWN,)))
    with pytest.raises(EdgeReasonError) as e:
        choose_models(settings, None)
    assert "127.0.0.1:9" in str(e.value) and "\n" not in str(e.value)
