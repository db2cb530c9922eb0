"""Template filters for units and small formatting needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

register = template.Library()


@register.filter
def gbps(value) -> str:
    """Bytes per second as decimal GB/s, the unit the seed studies use."""
    if value is None or value == "":
        return "—"
    return f"{float(value) / 1e9:,.1f} GB/s"


@register.filter
def num(value, digits: int = 3) -> str:
    """A number with thousands separators and up to ``digits`` significant decimals."""
    if value is None or value == "":
        return "—"
    value = float(value)
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{int(digits)}g}"


@register.filter
def bytes(value) -> str:  # noqa: A001 - the template filter's name
    """A byte count in binary units (what dd, fio and IOzone sizes use)."""
    if value is None or value == "":
        return "—"
    value = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"


@register.filter
def duration(seconds) -> str:
    """Seconds as 42 s, 3 min 20 s or 2 h 05 min."""
    if seconds is None or seconds == "":
        return "—"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@register.filter
def lookup(mapping, key):
    """``{{ colours|lookup:series }}``: a dict value by a variable key."""
    try:
        return mapping.get(key, "")
    except AttributeError:
        return ""


@register.filter
def signed_pct(value) -> str:
    """A difference in percent with its sign: +50.0%, −12%."""
    if value is None or value == "":
        return "—"
    value = float(value)
    text = f"{abs(value):.0f}" if abs(value) >= 10 else f"{abs(value):.1f}"
    return f"{'+' if value >= 0 else '−'}{text}%"


@register.filter
def pvalue(value) -> str:
    if value is None or value == "":
        return "—"
    value = float(value)
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


@register.filter
def pairs(mapping) -> list[tuple[Any, Any]]:
    """``{% for k, v in run.params|pairs %}``: a mapping's (key, value) pairs in its order.

    ``run.params.items`` in a template looks up the *key* "items" first (mdtest has a
    parameter of that name) and fails on its value; the same holds for keys, values, get...
    Anything but a mapping gives no pairs."""
    if isinstance(mapping, Mapping):
        return list(mapping.items())
    return []


@register.filter
def entry(mapping, key):
    """``{{ axis|entry:"values" }}``: a mapping's entry (None when missing), never one of
    its methods as ``axis.values`` would give for a mapping without that key."""
    if isinstance(mapping, Mapping):
        return mapping.get(key)
    return None


@register.filter
def param(value, key: str = "") -> str:
    """``{{ v|param:k }}``: a run parameter (or a metric's detail) for people, as comparisons
    show them: sizes in units (8000000000000.0 -> "8 TB", 10737418240 -> "10 GiB"), whole
    floats without ".0", booleans as yes/no, mappings as "key: value, …" and lists
    comma-separated, never Python's repr ({'per_process': True})."""
    from experiments.comparison.comparability import shown

    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {param(v, k)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(param(v, key) for v in value)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return shown(f"param:{key}", str(value))


@register.filter
def dimension_value(value, key: str = "") -> str:
    """``{{ p.x|dimension_value:result.x_dim }}``: a comparison's axis value; a parameter's
    as ``param`` shows it (10737418240 -> "10 GiB"), any other dimension's unchanged."""
    if isinstance(key, str) and key.startswith("param:"):
        return param(value, key[6:])
    return value
