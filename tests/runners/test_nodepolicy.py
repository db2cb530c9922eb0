"""A node's own limits (experiments.execution.nodepolicy): parsing BEEWEB_NODE_DIRS /
BEEWEB_NODE_TUNING,
the directory check with symlinks resolved, and a worker that refuses to start on bad values."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from experiments.execution import nodepolicy
from tests.labs import ROOT


def test_defaults_are_the_data_directory_and_no_tuning(tmp_path):
    policy = nodepolicy.parse("", "", tmp_path)
    assert policy.dirs == (str(tmp_path.resolve()),)
    assert policy.tuning == frozenset()
    assert policy.allows_dir(tmp_path / "bench" / "deeper")
    assert not policy.allows_dir("/etc") and not policy.allows_dir("/")
    assert not policy.allows_dir(f"{tmp_path}-sibling")  # a prefix is not a parent


def test_dirs_are_resolved_and_symlinks_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "escape").symlink_to("/etc")
    policy = nodepolicy.parse(f" {tmp_path / 'link'} :/nonexistent/yet", "false", "/unused")
    assert policy.dirs == (str(tmp_path / "real"), "/nonexistent/yet")
    assert policy.allows_dir(tmp_path / "real" / "x")
    assert not policy.allows_dir(tmp_path / "real" / "escape")  # resolves to /etc
    assert not policy.allows_dir(tmp_path / "real" / ".." / "other")


@pytest.mark.parametrize("value", ["relative/dir", "/ok:bench", "~/bench"])
def test_relative_dirs_are_refused(value):
    with pytest.raises(ImproperlyConfigured, match="^BEEWEB_NODE_DIRS: .* is not an absolute"):
        nodepolicy.parse(value, "false", "/var/beeweb")


def test_tuning_values():
    assert nodepolicy.parse("", "true", "/d").tuning == set(nodepolicy.tuning_keys())
    assert "os.vm.dirty_ratio" in nodepolicy.tuning_keys()
    assert "striping.chunksize" in nodepolicy.tuning_keys()
    assert nodepolicy.parse("", " False ", "/d").tuning == frozenset()
    listed = nodepolicy.parse("", "os.vm.dirty_ratio, striping.chunksize", "/d")
    assert listed.tuning == {"os.vm.dirty_ratio", "striping.chunksize"}
    assert listed.allows_key("os.vm.dirty_ratio") and not listed.allows_key("os.vm.swappiness")
    with pytest.raises(ImproperlyConfigured, match="os.kernel.core_pattern cannot be applied"):
        nodepolicy.parse("", "os.vm.dirty_ratio,os.kernel.core_pattern", "/d")


def test_check_warns_about_missing_directories(settings, tmp_path, caplog):
    settings.NODE_DIRS = f"{tmp_path}:{tmp_path / 'missing'}"
    settings.NODE_TUNING = "false"
    policy = nodepolicy.check()
    assert policy.dirs == (str(tmp_path), str(tmp_path / "missing"))
    assert f"{tmp_path / 'missing'} does not exist" in caplog.text


def test_a_worker_with_a_malformed_policy_does_not_start(tmp_path):
    env = {"BEEWEB_DATA_DIR": str(tmp_path), "BEEWEB_NODE_DIRS": "bench", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "beeweb", "worker", "--pool=solo",
         "-Q", "node.nowhere", "-n", "policy@nowhere"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "ImproperlyConfigured: BEEWEB_NODE_DIRS: 'bench' is not an absolute path" in (
        proc.stdout + proc.stderr
    )
