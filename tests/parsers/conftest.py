"""Parser tests read the real sample outputs in ../shared/samples and need no database."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples"


def read_sample(relative: str) -> str:
    path = SAMPLES / relative
    if not path.exists():  # pragma: no cover - the samples travel with the repository's CI
        pytest.fail(f"sample {path} is missing; ../shared/samples must sit beside the checkout")
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture
def sample():
    return read_sample
