"""pytest fixtures for :mod:`tests.netns`; a test module enables them with
``pytest_plugins = ["tests.netns_fixtures"]``.

A module may set ``NETNS_NODES = 4`` (default 3) and ``NETNS_FORWARD = [5432]`` (default
PostgreSQL's and Redis's ports) before using ``netns_lab``.
"""

from __future__ import annotations

import pytest

from tests.netns import NetnsLab

DEFAULT_NODES = 3
DEFAULT_FORWARD = (5432, 6379)


@pytest.fixture(scope="session")
def netns_available() -> None:
    """Skip, with the reason, when this machine cannot build network namespaces."""
    ok, reason = NetnsLab.available()
    if not ok:
        pytest.skip(f"network-namespace lab unavailable: {reason}")


@pytest.fixture(scope="module")
def netns_lab(request, netns_available) -> NetnsLab:
    """A started lab shared by the module's tests, forwarding PostgreSQL and Redis ports."""
    lab = NetnsLab(n=getattr(request.module, "NETNS_NODES", DEFAULT_NODES))
    lab.start()
    try:
        lab.forward(getattr(request.module, "NETNS_FORWARD", DEFAULT_FORWARD))
        yield lab
    finally:
        lab.stop()
