"""Small helpers shared by views and management commands."""

from __future__ import annotations

import uuid


def is_uuid(value: str) -> bool:
    """True when ``value`` parses as a UUID (public identifiers in URLs and commands)."""
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True
