"""The test suite's own layers (issue 24): a test module imports no other test module and no
conftest.py. Fixtures reach tests through the conftest.py files; plain helpers and data live in
tests/helpers (unit tests) and tests/labs (end-to-end labs), which hold no fixtures."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _forbidden(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def imported_test_modules(path: Path) -> list[str]:
    """Each import in ``path`` of a test module or a conftest.py, as ``line: module``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            # ``from tests.api import conftest`` names the module in its imported names.
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [f"{node.lineno}: {name}" for name in names if _forbidden(name)]
    return found


def test_no_test_module_or_conftest_imports_a_test_module_or_a_conftest():
    offenders = {
        str(path.relative_to(TESTS.parent)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := imported_test_modules(path))
    }
    assert offenders == {}, "move the helper to tests/helpers, the fixture to a conftest.py"


def test_the_shared_helpers_define_no_fixtures():
    for folder in ("helpers", "labs"):
        for path in sorted((TESTS / folder).rglob("*.py")):
            assert "pytest.fixture" not in path.read_text(encoding="utf-8"), path


def test_the_check_sees_every_spelling(tmp_path):
    bad = tmp_path / "test_bad.py"
    t = "tests"  # spelled apart, so that grep finds no such import in this file either
    bad.write_text(
        f"from {t}.runners.test_execute import make_matrix\n"
        f"from {t}.api.conftest import token_client\n"
        f"from {t}.api import conftest\n"
        "from .test_comparison_stats import add_run\n"
        f"import {t}.experiments.test_bottleneck\n"
        f"from {t}.helpers.samples import SAMPLES\n"
        f"from {t}.labs import Stack\n",
        encoding="utf-8",
    )
    assert imported_test_modules(bad) == [
        "1: tests.runners.test_execute",
        "2: tests.api.conftest",
        "3: tests.api.conftest",
        "4: .test_comparison_stats",
        "5: tests.experiments.test_bottleneck",
    ]
