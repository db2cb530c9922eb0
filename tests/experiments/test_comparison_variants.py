"""``comparability.label_variants`` names each series' variants by the fewest attributes that
tell apart the points that must not share a label: the same choice as comparing every pair
of points (how it was computed before it refined classes of points), on random points."""

from __future__ import annotations

import random

import pytest

from experiments.comparison import comparability
from experiments.comparison.result import Point


def _pairwise(points: list[Point], exempt: set[str], lines: bool) -> dict[int, str]:
    """Each point's variant, from every pair of points of its series."""
    from collections import defaultdict

    by_series = defaultdict(list)
    for p in points:
        by_series[(p.metric, p.series_key)].append(p)
    out = {}
    for pts in by_series.values():
        keys = sorted(set().union(*(p.attributes for p in pts)), key=comparability._attribute_order)
        keys = [k for k in keys if k != "memory"]
        line_keys = [
            k
            for k in keys
            if (k in comparability.SETUP or k in comparability.ALONG_A_LINE) and k not in exempt
        ]

        def apart(p, q, line_keys=line_keys):
            if (p.x_key, p.y_key) == (q.x_key, q.y_key):
                return True
            return lines and any(p.attributes.get(k) != q.attributes.get(k) for k in line_keys)

        pairs = [(p, q) for i, p in enumerate(pts) for q in pts[i + 1 :] if apart(p, q)]
        chosen = []
        for key in keys:
            if not pairs:
                break
            if any(p.attributes.get(key) != q.attributes.get(key) for p, q in pairs):
                chosen.append(key)
                pairs = [(p, q) for p, q in pairs if p.attributes.get(key) == q.attributes.get(key)]
        for p in pts:
            if chosen:
                out[id(p)] = ", ".join(
                    comparability._variant_text(k, p.attributes.get(k)) for k in chosen
                )
    return out


KEYS = ["tool", "target", "param:threads", "param:bs", "param:direct", "param:iodepth", "memory"]


@pytest.mark.parametrize("lines", [False, True])
def test_variants_equal_the_pairwise_choice(lines):
    rng = random.Random(17)
    labelled = 0
    for _ in range(300):
        points = []
        for _ in range(rng.randint(1, 14)):
            attributes = {
                k: rng.choice(["a", "b", "c"][: rng.randint(1, 3)])
                for k in KEYS
                if rng.random() < 0.8
            }
            x = str(rng.choice([1, 4, 16]))
            series = rng.choice(["arm", "x86"])
            points.append(
                Point(
                    *("write_bw", series, series, x, x, "", ""),
                    *(1, 1.0, 1.0, 1.0, 1.0, None, None, None, None, False, "B/s"),
                    attributes=attributes,
                )
            )
        exempt = set(rng.sample(KEYS, rng.randint(0, 2)))
        expected = _pairwise(points, exempt, lines)
        comparability.label_variants(points, exempt, lines)
        assert [p.variant for p in points] == [expected.get(id(p), "") for p in points]
        labelled += sum(1 for p in points if p.variant)
    assert labelled > 500
