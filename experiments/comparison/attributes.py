"""The attributes that make runs alike (DESIGN.md "what makes runs alike"): their keys,
labels in sentences, and which names a comparison URL may use. Below both the comparison's
spec (which checks URLs) and comparability (which compares runs attribute by attribute)."""

from __future__ import annotations

from experiments.comparison import dimensions

SETUP = ("tool", "testbed", "target", "tuning", "source", "hardware")
SETUP_LABELS = {
    "tool": "tool",
    "testbed": "testbed",
    "target": "target",
    "tuning": "tuning set",
    "source": "data source",
    "hardware": "hardware",
    "memory": "working set vs clients' memory",
}


def attribute_name(key: str) -> str:
    """ "param:threads" -> "threads", "tool" -> "tool" (for sentences)."""
    if key.startswith("param:"):
        return key[6:].replace("_", " ")
    return SETUP_LABELS.get(key, key)


def valid_attribute(key: str) -> bool:
    """An attribute name the URL may ignore: a setup attribute or ``param:<name>``."""
    if key in SETUP_LABELS:
        return True
    head, _, name = key.partition(":")
    return head == "param" and dimensions.safe_name(name)
