"""What a worker reads from its node before a run, and the allowlist it applies tunings by."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from experiments.execution import nodepolicy
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


def test_mount_of_reads_the_deepest_topmost_mount(monkeypatch):
    """The one mount-table reader (local_raid and the localhost inventory use it too):
    octal escapes undone, the topmost of two mounts on one point, options merged like
    /proc/mounts (no second "rw")."""
    table = "\n".join(
        [
            "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro",
            "40 22 0:35 / /srv/my\\040disk rw,nosuid shared:2 - tmpfs tmpfs rw,size=64k",
            "41 40 0:36 / /srv/my\\040disk rw,relatime shared:3 - btrfs /dev/loop0 rw,ssd",
        ]
    )
    monkeypatch.setattr(nodeconfig, "_read_text", lambda path: table)
    assert nodeconfig.mount_of("/srv/my disk/bench") == {
        "mount_point": "/srv/my disk",
        "fstype": "btrfs",
        "source": "/dev/loop0",
        "options": "rw,relatime,ssd",
    }
    assert nodeconfig.mount_of("/srv/other")["options"] == "rw,relatime,errors=remount-ro"


def test_unlisted_keys_and_unsafe_values_are_never_applied(tmp_path):
    values = {
        "storage.tuneNumWorkers": "48",
        "os.kernel.core_pattern": "|/bin/sh",
        "os.vm.dirty_ratio": "10; reboot",
        "striping.chunksize": "512k",
    }
    everything = {*values, *nodepolicy.tuning_keys()}
    actions = nodeconfig.apply_tuning(values, tmp_path, allowed=everything)
    results = {a["key"]: a["result"] for a in actions}
    # A server key is not this node's to apply: the servers' own workers do it
    # (experiments.execution.beegfs).
    assert results["storage.tuneNumWorkers"].startswith("not a setting of this node")
    assert results["os.kernel.core_pattern"].startswith("skipped")
    assert results["os.vm.dirty_ratio"].startswith("skipped: value has characters")
    assert results["striping.chunksize"] == "skipped: no BeeGFS command-line tool on this node"


def test_keys_the_node_does_not_allow_are_refused(tmp_path):
    before = DIRTY.read_text()
    actions = nodeconfig.apply_tuning({"os.vm.dirty_background_ratio": "7"}, tmp_path)
    assert actions == [
        {
            "key": "os.vm.dirty_background_ratio",
            "value": "7",
            "result": "refused: this node's BEEWEB_NODE_TUNING does not allow it",
        }
    ]
    assert nodeconfig.restore_tuning(actions) == actions  # nothing to put back
    assert DIRTY.read_text() == before


@pytest.mark.skipif(not os.access(DIRTY, os.W_OK), reason="/proc/sys is read-only here")
def test_allowlisted_sysctl_is_applied_then_restored(tmp_path):
    before = DIRTY.read_text().strip()
    wanted = "7" if before != "7" else "8"
    try:
        actions = nodeconfig.apply_tuning(
            {"os.vm.dirty_background_ratio": wanted}, tmp_path, {"os.vm.dirty_background_ratio"}
        )
        assert actions == [
            {
                "key": "os.vm.dirty_background_ratio",
                "value": wanted,
                "before": before,
                "path": str(DIRTY),
                "result": "applied",
            }
        ]
        assert DIRTY.read_text().strip() == wanted
        nodeconfig.restore_tuning(actions)
        assert actions[0]["restored"] == "restored"
        assert DIRTY.read_text().strip() == before
    finally:
        DIRTY.write_text(before + "\n")


def test_current_value_of_a_selector_file_is_its_bracketed_choice(tmp_path):
    selector = tmp_path / "enabled"
    selector.write_text("always [madvise] never\n")
    assert nodeconfig._current(selector) == "madvise"
    (tmp_path / "rmem").write_text("4096\t131072\t6291456\n")
    assert nodeconfig._current(tmp_path / "rmem") == "4096 131072 6291456"


def test_drop_caches_reports_what_happened():
    result = nodeconfig.drop_caches()
    assert result == "dropped" if os.geteuid() == 0 else result.startswith("not permitted")


def test_only_transient_errors_are_retried():
    from django.db import InterfaceError, OperationalError

    from experiments.execution.tasks import execute_run

    assert set(execute_run.autoretry_for) == {OperationalError, InterfaceError}
    assert execute_run.acks_late is True


def test_where_a_command_is_found_is_searched_again_once_too_old(tmp_path, monkeypatch):
    """nodeconfig.which (the tool's and BeeGFS's CLIs) reuses a search of PATH for
    WHICH_MAX_AGE_S: a command removed meanwhile shows as gone once the search is older."""
    tool = tmp_path / "beeweb-which-test"
    tool.write_text("#!/bin/sh\necho 'beeweb-which-test 1.0'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    assert nodeconfig.which(tool.name) == str(tool)
    assert nodeconfig.tool_version((tool.name, "--version")) == "beeweb-which-test 1.0"
    tool.unlink()
    assert nodeconfig.which(tool.name) == str(tool)  # a recent search: reused
    assert nodeconfig.tool_version((tool.name, "--version")) is None  # the file is gone
    monkeypatch.setattr(nodeconfig, "WHICH_MAX_AGE_S", 0.0)
    assert nodeconfig.which(tool.name) is None


def test_the_mount_table_is_parsed_again_when_it_changes(monkeypatch):
    tables = iter(
        [
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n",
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n",
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n30 22 0:5 / /srv rw - xfs /dev/sdb rw\n",
        ]
    )
    monkeypatch.setattr(nodeconfig, "_read_text", lambda path: next(tables))
    assert nodeconfig.mount_of("/srv/bench")["mount_point"] == "/"
    assert nodeconfig.mount_of("/srv/bench")["mount_point"] == "/"
    assert nodeconfig.mount_of("/srv/bench") == {
        "mount_point": "/srv",
        "fstype": "xfs",
        "source": "/dev/sdb",
        "options": "rw",
    }
