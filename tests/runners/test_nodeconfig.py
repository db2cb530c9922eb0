"""What a worker reads from its node before a run, and the allowlist it applies tunings by."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runners import nodeconfig

DIRTY = Path("/proc/sys/vm/dirty_background_ratio")


def test_read_reports_kernel_sysctls_and_the_mount(tmp_path):
    config = nodeconfig.read(tmp_path, ["dd", "--version"])
    assert config["kernel"] == os.uname().release
    assert config["sysctl"]["vm.dirty_ratio"].isdigit()
    assert config["mount"]["fstype"]
    assert str(tmp_path).startswith(config["mount"]["mount_point"])
    assert config["tool_version"].startswith("dd (coreutils)")
    assert config["beegfs_entry"] is None  # no BeeGFS CLI on this machine


def test_unlisted_keys_and_unsafe_values_are_never_applied(tmp_path):
    actions = nodeconfig.apply_tuning(
        {
            "storage.tuneNumWorkers": "48",
            "os.kernel.core_pattern": "|/bin/sh",
            "os.vm.dirty_ratio": "10; reboot",
            "striping.chunksize": "512k",
        },
        tmp_path,
    )
    results = {a["key"]: a["result"] for a in actions}
    assert results["storage.tuneNumWorkers"].startswith("skipped: not in the allowlist")
    assert results["os.kernel.core_pattern"].startswith("skipped")
    assert results["os.vm.dirty_ratio"].startswith("skipped: value has characters")
    assert results["striping.chunksize"] == "skipped: no BeeGFS command-line tool on this node"


@pytest.mark.skipif(not os.access(DIRTY, os.W_OK), reason="/proc/sys is read-only here")
def test_allowlisted_sysctl_is_applied(tmp_path):
    before = DIRTY.read_text().strip()
    wanted = "7" if before != "7" else "8"
    try:
        actions = nodeconfig.apply_tuning({"os.vm.dirty_background_ratio": wanted}, tmp_path)
        assert actions == [
            {"key": "os.vm.dirty_background_ratio", "value": wanted, "result": "applied"}
        ]
        assert DIRTY.read_text().strip() == wanted
    finally:
        DIRTY.write_text(before + "\n")


def test_drop_caches_reports_what_happened():
    result = nodeconfig.drop_caches()
    assert result == "dropped" if os.geteuid() == 0 else result.startswith("not permitted")


def test_only_transient_errors_are_retried():
    from django.db import InterfaceError, OperationalError

    from runners.tasks import execute_run

    assert set(execute_run.autoretry_for) == {OperationalError, InterfaceError}
    assert execute_run.acks_late is True
