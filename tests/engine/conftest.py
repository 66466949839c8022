"""The `backend` fixture: each real-model engine test runs once per backend of
real_backends.engine_backends()."""

from __future__ import annotations

import pytest
from real_backends import engine_backends


@pytest.fixture(scope="module", params=engine_backends())
def backend(request) -> str:
    return request.param
