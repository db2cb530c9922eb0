"""Template filters for units and small formatting needs."""

from __future__ import annotations

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
