"""Tool adapters: validated parameters in, a shell-free ``Command`` out, one module per tool.

Each adapter module ``runners.registry`` names (``runners/tools/<tool>.py``) exposes
``ADAPTER``, an ``Adapter`` subclass instance with the same shape as every other (see
``runners.tools.base``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from runners import registry
from runners.tools.base import (
    Adapter,
    Command,
    Host,
    LaunchContext,
    Param,
    ParamError,
)

__all__ = [
    "ADAPTERS",
    "Adapter",
    "Command",
    "Host",
    "LaunchContext",
    "Param",
    "ParamError",
    "build_command",
    "get_adapter",
]

# The runnable tools, in the registry's order.
TOOL_MODULES = [t.name for t in registry.runnable()]

ADAPTERS: dict[str, Adapter] = {
    t.name: importlib.import_module(t.adapter).ADAPTER for t in registry.runnable() if t.adapter
}


def get_adapter(tool: str) -> Adapter:
    """The adapter for ``tool``; ParamError("tool", ...) for an unknown name."""
    try:
        return ADAPTERS[tool]
    except (KeyError, TypeError):
        known = ", ".join(ADAPTERS)
        raise ParamError("tool", f"unknown tool {tool!r} (known: {known})") from None


def build_command(tool: str, params: Mapping[str, Any] | None, ctx: LaunchContext) -> Command:
    """``get_adapter(tool).build(params, ctx)``."""
    return get_adapter(tool).build(params, ctx)
