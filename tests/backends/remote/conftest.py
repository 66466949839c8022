"""A real OpenAI-compatible server for the remote backend's tests (remote_server.py), stopped at the
end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from remote_server import LocalServer


@pytest.fixture(scope="session")
def server(smollm2_path: Path) -> Iterator[LocalServer]:
    srv = LocalServer(smollm2_path)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def second_server(smollm2_path: Path) -> Iterator[LocalServer]:
    """Another server of the same model, beside `server`: a list of two."""
    srv = LocalServer(smollm2_path, n_ctx=2048, n_threads=1)
    yield srv
    srv.stop()


@pytest.fixture()
def own_server(smollm2_path: Path) -> Iterator[LocalServer]:
    """A server this test may kill."""
    srv = LocalServer(smollm2_path, n_ctx=2048)
    yield srv
    srv.stop()
