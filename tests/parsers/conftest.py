"""Parser tests read the real sample outputs in ../shared/samples and need no database."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

# The real tool outputs live in ../shared/samples beside the checkout (as in CI);
# BEEWEB_SAMPLES_DIR points elsewhere.
SAMPLES = Path(
    os.environ.get("BEEWEB_SAMPLES_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared" / "samples"
)

if not SAMPLES.is_dir() and not os.environ.get("CI"):
    # A clone without the shared samples beside it: skip the parser tests, loudly. CI never
    # skips them (the missing directory then fails collection).
    warnings.warn(
        f"parser tests skipped: no samples at {SAMPLES} (set BEEWEB_SAMPLES_DIR)", stacklevel=1
    )
    collect_ignore_glob = ["test_*.py"]


def read_sample(relative: str) -> str:
    path = SAMPLES / relative
    if not path.exists():  # pragma: no cover - the samples travel with the repository's CI
        pytest.fail(f"sample {path} is missing; ../shared/samples must sit beside the checkout")
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


@pytest.fixture
def sample():
    return read_sample
