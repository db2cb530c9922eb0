"""The real tool outputs the tests read: ../shared/samples beside the checkout (as in CI), or
BEEWEB_SAMPLES_DIR; a fio console captured here; and ``metric``, one metric of a parse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SAMPLES = Path(
    os.environ.get("BEEWEB_SAMPLES_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared" / "samples"
)


def read_sample(relative: str) -> str:
    """The sample ``relative`` (to SAMPLES); the test fails where it is missing."""
    path = SAMPLES / relative
    if not path.exists():  # pragma: no cover - the samples travel with the repository's CI
        pytest.fail(f"sample {path} is missing; ../shared/samples must sit beside the checkout")
    return path.read_text(encoding="utf-8", errors="replace")


def sample(relative: str) -> str:
    """The sample ``relative`` (to SAMPLES); where it is missing the test is skipped, or fails in
    CI (``read_sample`` always fails)."""
    path = SAMPLES / relative
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"sample {path} is missing")
        pytest.skip(f"no sample {path} (set BEEWEB_SAMPLES_DIR)")
    return path.read_text(encoding="utf-8", errors="replace")


def metric(result, name, stat="value", iteration=None, **extra):
    """The one metric matching name/stat/iteration and the given extra keys (None = absent)."""
    found = [
        m
        for m in result.metrics
        if m.name == name
        and m.stat == stat
        and m.iteration == iteration
        and all(m.extra.get(k) == v for k, v in extra.items())
    ]
    assert len(found) == 1, f"{len(found)} metrics match {name}/{stat}/{extra}"
    return found[0].value


# fio --output-format=json --output=... --eta=always --eta-newline=1 --rw=write --bs=1m
# --time_based --runtime=7 --rate=20m, its console byte for byte (cat -A showed ^M and $).
FIO_WRITE = (
    "Jobs: 1 (f=1), 0B/s-20.0MiB/s\r"
    "Jobs: 1 (f=1), 0B/s-20.0MiB/s: [W(1)][37.5%][w=20.0MiB/s][w=19 IOPS][eta 00m:05s]\r\n"
    "Jobs: 1 (f=1), 0B/s-20.0MiB/s: [W(1)][42.9%][w=20.0MiB/s][w=20 IOPS][eta 00m:04s]\r"
    "Jobs: 1 (f=1), 0B/s-20.0MiB/s: [W(1)][57.1%][w=20.0MiB/s][w=20 IOPS][eta 00m:03s] \r\n"
)
