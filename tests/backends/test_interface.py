"""The one interface's declared capabilities against what each registered backend implements."""

from __future__ import annotations

import pytest

from edgereason.backends import Backend, load_backend


@pytest.mark.parametrize("name", ["llamacpp", "torch", "transformers", "remote"])
def test_a_backend_profiles_exactly_the_roles_its_capabilities_declare(name):
    backend = load_backend(name)
    profiles = backend.capabilities.profiles
    assert profiles <= backend.capabilities.roles
    implements = {
        "generator": type(backend).profiled_generator is not Backend.profiled_generator,
        "verifier": type(backend).profiled_prm is not Backend.profiled_prm,
    }
    assert {role for role, has in implements.items() if has} == profiles


def test_served_models_are_not_profiled_here_and_transformers_profiles_its_prm():
    assert load_backend("remote").capabilities.profiles == frozenset()
    assert load_backend("transformers").capabilities.profiles == {"verifier"}
