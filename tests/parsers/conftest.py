"""Parser tests read the real sample outputs in ../shared/samples and need no database."""

from __future__ import annotations

import os
import warnings

import pytest

from tests.helpers.samples import SAMPLES, read_sample

if not SAMPLES.is_dir() and not os.environ.get("CI"):
    # A clone without the shared samples beside it: skip the parser tests, loudly. CI never
    # skips them (the missing directory then fails collection).
    warnings.warn(
        f"parser tests skipped: no samples at {SAMPLES} (set BEEWEB_SAMPLES_DIR)", stacklevel=1
    )
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def sample():
    return read_sample
