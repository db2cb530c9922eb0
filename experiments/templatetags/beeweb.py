"""Template filters for units and small formatting needs."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from django import template
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.formats import localize
from django.utils.safestring import SafeData, mark_safe

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
    from runners.params import human

    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {param(v, k)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(param(v, key) for v in value)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return human(key, value)


@register.filter
def dimension_value(value, key: str = "") -> str:
    """``{{ p.x|dimension_value:result.x_dim }}``: a comparison's axis value; a parameter's
    as ``param`` shows it (10737418240 -> "10 GiB"), any other dimension's unchanged."""
    if isinstance(key, str) and key.startswith("param:"):
        return param(value, key[6:])
    return value


# The comparison table's rows and the configuration differences, rendered in Python: at
# 84 points and 574 difference rows the template loops cost ~60 ms of CPU per page (every
# {{ p.x }} a variable lookup, every filter a call through the template engine). These give
# exactly the HTML the template loops gave (tests/experiments/test_compare_render.py renders
# both and compares them).


def _text(value) -> str:
    """A value as the template engine prints it with autoescaping on ({{ value }}):
    localized (numbers), then escaped unless already safe (django.utils.html.escape is
    html.escape of str(value), wrapped as lazy-aware and safe: not needed here)."""
    if type(value) is str:
        return html.escape(value)
    if value is None:
        return "None"
    if isinstance(value, SafeData):
        return value
    return html.escape(str(localize(value)))


@register.simple_tag
def comparison_rows(result, metric, points):
    """``{% comparison_rows result m pts %}``: the <tr> rows of one metric's table."""

    e = _text
    colours = result.colours
    x_dim, y_dim = result.x_dim, result.y_dim
    show_x, show_y = bool(result.x_label), bool(result.y_label)
    peak = result.statistic == "peak"
    verdicts, steady = result.has_verdicts, result.has_steady
    baseline = bool(result.baseline_label)
    unit = e(metric.unit)
    out = []
    add = out.append
    for p in points:
        add('<tr>\n<td><span class="swatch" style="background:')
        add(e(lookup(colours, p.series)))
        add('"></span>')
        add(e(p.series))
        add("</td>")
        if show_x:
            add(f"<td>{e(dimension_value(p.x, x_dim))}</td>")
        if show_y:
            add(f"<td>{e(dimension_value(p.y, y_dim))}</td>")
        add("\n")
        if peak:
            if p.peak_of > 1:
                add(
                    f'<td>{e(p.peak_at or "—")} <span class="muted">(best of '
                    f"{e(p.peak_of)})</span></td>"
                )
            else:
                add(
                    f'<td>{e(p.peak_at or "")} <span class="muted">(one point: no sweep)'
                    "</span></td>"
                )
        mn, mx = num(p.min, 4), num(p.max, 4)
        add('<td class="num"')
        if p.why_n:
            add(f' title="{e(p.why_n)}"')
        add(f">{e(p.n)}</td>")
        if p.approximate:
            add(
                '<td class="num" title="approximate: the study gives the value as '
                '&quot;about&quot;">≈'
            )
        else:
            add('<td class="num">')
        add(
            f'{num(p.mean, 4)}</td><td class="num">{num(p.median, 4)}</td><td class="num">'
            f'{mn}</td><td class="num">{mx}</td><td class="num">{num(p.stddev, 3)}</td>\n'
            f'<td class="num{" noisy" if p.noisy else ""}">'
        )
        add("—" if p.cv is None else f"{floatformat(p.cv_pct, 1)}%")
        add('</td>\n<td class="num ci">')
        if p.n < 3:
            add(
                '<span class="muted" title="A 95% confidence interval of fewer than three '
                f'values says little; min–max {mn} – {mx}">n &lt; 3</span>'
            )
        elif p.ci_low is not None:
            add(f"{num(p.ci_low, 4)} – {num(p.ci_high, 4)}")
        else:
            add("—")
        add('</td>\n<td class="num"')
        if p.limit_name:
            add(
                f' title="{e(p.limit_name)} ({e(p.limit_scope)}): {num(p.limit_value, 4)} '
                f'{unit} ({e(p.limit_detail)})"'
            )
        add(">")
        if p.efficiency is not None:
            add(f'{floatformat(p.efficiency, 0)}% <span class="muted">of {e(p.limit_name)}')
            if p.limit_scope and p.limit_scope != "testbed":
                add(f" ({e(p.limit_scope)})")
            add("</span>")
        else:
            add("—")
        add("</td>\n")
        if verdicts:
            add(f'<td class="bottleneck">{e(p.bottleneck_text or "—")}</td>')
        if steady:
            add('<td class="num steady">')
            if p.steady is not None:
                add(f"{num(p.steady, 4)} / {num(p.whole, 4)}")
                if p.steady_n < p.n:
                    add(f' <span class="muted">({e(p.steady_n)} of {e(p.n)} runs)</span>')
            else:
                add("—")
            add("</td>")
        add("\n")
        if baseline:
            add(
                f'<td class="num">{signed_pct(p.diff_pct)}</td>'
                f'<td class="num">{e(pvalue(p.p_value))}</td>'
            )
        add("\n<td>")
        if p.testbed == "(several)":
            add('<span class="muted">several testbeds</span>')
        for f in p.flags:
            cls = (" cache" if "cache" in f else "") + (
                " collapsed" if f[:9] == "collapsed" else ""
            )
            add(f'<span class="flag{cls}">{e(f)}</span>')
        if p.why_n:
            add(f'<span class="muted why-n">{e(p.why_n)}</span>')
        if p.config_key:
            url = reverse("experiments:config_history", args=[p.config_key])
            add(
                f' <a class="history-link" href="{e(url)}?metric={e(p.metric)}" '
                'title="This configuration\'s runs over time and its change points">'
                "history of this point</a>"
            )
        add("</td>\n</tr>")
    return mark_safe("".join(out))  # noqa: S308 - every value above is escaped


def _difference_rows(rows) -> str:
    e = _text
    return "".join(
        f"<tr><td>{e(r[0])}</td><td>{e(r[1])}</td><td>{e(r[2])}</td><td>{e(r[3])}</td></tr>"
        for r in rows
    )


@register.simple_tag
def differences(items):
    """``{% differences result.differences %}``: one <details> per series against the
    baseline, with its table of what differs (open when it has at most 12 rows). Every row
    is a difference: the table body carries the "changed" class once, not each of its rows
    (574 rows on the benchmark's 1% page: 12 KB)."""
    e = _text
    out = []
    for d in items:
        rows = d.rows
        series, baseline = e(d.series), e(d.baseline)
        out.append(
            f'\n<details class="diff"{" open" if len(rows) <= 12 else ""}><summary>{series} vs '
            f"{baseline}: "
        )
        if rows:
            out.append(
                f"{len(rows)} difference{'' if len(rows) == 1 else 's'} ({e(d.areas)})</summary>\n"
                '<div class="table-scroll"><table class="diff-table"><thead><tr><th>Area</th>'
                f"<th>Attribute</th><th>{series}</th><th>{baseline}</th></tr></thead>"
                '<tbody class="changed">\n'
                f"{_difference_rows(rows)}</tbody></table></div>"
            )
        else:
            out.append("same hardware, testbed and tuning</summary>\n")
        out.append("\n</details>")
    return mark_safe("".join(out))  # noqa: S308 - every value is escaped


@register.simple_tag
def uuid_options(choices, selected):
    """``{% uuid_options matrices spec.matrices %}``: the <option>s of a select of objects
    by UUID, from (uuid, name) pairs, those whose UUID (as text) is in ``selected`` marked
    selected. The comparison page lists every matrix (999 in the benchmark database): as a
    template loop that took ~60 ms of CPU per page."""
    e = _text
    chosen = set(selected or ())
    out = []
    for uuid, name in choices:
        key = str(uuid)
        out.append(
            f'<option value="{e(key)}"{" selected" if key in chosen else ""}>{e(name)}</option>'
        )
    return mark_safe("".join(out))  # noqa: S308 - every value is escaped


@register.filter(is_safe=True)
def json_data(value, element_id: str):
    """``{{ charts_json|json_data:"chart-data" }}``: Django's json_script without the
    spaces json.dumps puts after every "," and ":" (the same JSON, about a tenth smaller:
    the comparison page's chart data is most of its weight)."""
    import json

    from django.core.serializers.json import DjangoJSONEncoder
    from django.utils.html import format_html

    text = json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))
    text = text.replace("&", "\\u0026").replace("<", "\\u003C").replace(">", "\\u003E")
    return format_html(
        '<script id="{}" type="application/json">{}</script>', element_id, mark_safe(text)
    )


@register.simple_tag
def choice_options(choices, selected):
    """``{% choice_options dims spec.x %}``: the <option>s of (key, label) pairs, the one
    equal to ``selected`` marked selected (the comparison builder's four selects of ~50
    dimensions each, without a template loop)."""
    e = _text
    return mark_safe(  # noqa: S308 - every value is escaped
        "".join(
            f'<option value="{e(key)}"{" selected" if key == selected else ""}>{e(label)}</option>'
            for key, label in choices
        )
    )
