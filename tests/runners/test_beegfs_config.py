"""BeeGFS server tuning without a daemon: the config file rewritten key by key, the key list's
refusals and BeeGFS's value syntax, and the node settings that allow it (issue 26)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from experiments.execution import nodepolicy
from experiments.shared import tuning_keys
from runners import beegfs_config as bc
from tests.labs import ROOT

CONF = """# beegfs-storage.conf as a server ships it
sysMgmtdHost                 = mgmt01
storeStorageDirectory        = /data/t1,/data/t2

tuneNumWorkers               = 12   # per target
tuneFileWriteSize            = 64k
"""


def test_rewrite_changes_only_the_asked_keys_and_keeps_the_rest():
    out = bc.rewrite(CONF, {"tuneNumWorkers": "2", "tuneFileReadAheadSize": "1m"})
    assert out == CONF.replace("= 12   # per", "= 2   # per") + "tuneFileReadAheadSize = 1m\n"
    assert bc.conf_values(out)["tuneNumWorkers"] == "2"
    assert bc.rewrite(CONF, {}) == CONF
    # A commented-out line is not the key.
    text = "#tuneNumWorkers = 4\n"
    assert bc.rewrite(text, {"tuneNumWorkers": "8"}) == text + "tuneNumWorkers = 8\n"
    # A file without a final newline gets one before an appended key.
    assert bc.rewrite("a = 1", {"b": "2"}) == "a = 1\nb = 2\n"


def test_original_is_saved_once_and_restored_byte_for_byte(tmp_path):
    conf = tmp_path / "beegfs-storage.conf"
    conf.write_bytes(CONF.encode())
    svc = bc.Service("storage", conf, ("true",), ("beegfs-ctl",), "s1")
    assert bc.save_original(svc)
    bc.write_conf(svc, bc.rewrite(CONF, {"tuneNumWorkers": "2"}))
    assert not bc.save_original(svc)  # the first original stays
    assert svc.original.read_bytes() == CONF.encode()
    assert bc.restore_original(svc)
    assert conf.read_bytes() == CONF.encode() and not svc.original.exists()
    assert not bc.restore_original(svc)


def test_service_values_are_checked_typed_and_rendered_as_beegfs_writes_them():
    values, errors = tuning_keys.service_values(
        {
            "storage.tuneNumWorkers": "16",
            "storage.tuneFileReadAheadSize": "2048k",
            "storage.tuneUsePerTargetWorkers": "yes",
            "meta.tuneTargetChooser": "RoundRobin",
            "os.vm.dirty_ratio": "10",  # not a server key: left to the node's own tuning
        }
    )
    assert errors == []
    assert values == {
        "storage": {
            "tuneNumWorkers": "16",
            "tuneFileReadAheadSize": "2m",
            "tuneUsePerTargetWorkers": "true",
        },
        "meta": {"tuneTargetChooser": "roundrobin"},
    }
    assert tuning_keys.same_value("storage", "tuneFileWriteSize", "1m", "1024k")
    assert not tuning_keys.same_value("storage", "tuneNumWorkers", "2", None)


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("storage.storeStorageDirectory", "moves the data"),
        ("meta.storeMetaDirectory", "moves the metadata"),
        ("storage.storeAllowFirstRunInit", "new target"),
        ("storage.sysMgmtdHost", "another file system"),
        ("storage.connStoragePortTCP", "port"),
        ("meta.connMetaPortUDP", "port"),
        ("storage.logStdFile", "path the daemon writes to"),
        ("storage.connInterfacesList", "interfaces"),
        ("storage.tuneNoSuchKey", "not a known BeeGFS storage setting"),
    ],
)
def test_keys_that_move_data_or_identity_are_refused(key, why):
    values, errors = tuning_keys.service_values({key: "x"})
    assert values == {}
    assert len(errors) == 1 and why in errors[0], errors


def test_wrongly_typed_values_are_refused():
    _, errors = tuning_keys.service_values({"storage.tuneNumWorkers": "many"})
    assert errors == ["storage.tuneNumWorkers: tuneNumWorkers expects a whole number, got 'many'"]
    _, errors = tuning_keys.service_values({"storage.tuneNumWorkers": "0"})
    assert "at least 1" in errors[0]


def test_policy_defaults_refuse_and_name_the_standard_paths():
    policy = nodepolicy.parse("", "", "/d")
    assert policy.beegfs is False
    conf, restart, name = policy.beegfs_service("storage")
    assert conf == "/etc/beegfs/beegfs-storage.conf"
    assert restart == ("systemctl", "restart", "beegfs-storage")
    assert name  # the hostname
    assert policy.beegfs_ctl == ("beegfs-ctl",)


def test_policy_reads_the_node_settings():
    policy = nodepolicy.parse(
        "",
        "",
        "/d",
        beegfs={
            "BEEWEB_NODE_BEEGFS": "true",
            "BEEWEB_NODE_BEEGFS_META_CONF": "/srv/lab/etc/meta-node1.conf",
            "BEEWEB_NODE_BEEGFS_META_RESTART": "setsid bash '/srv/lab x/lab.sh' restart meta",
            "BEEWEB_BEEGFS_CTL": "/opt/beegfs/sbin/beegfs-ctl --cfgFile=/etc/beegfs/c.conf",
            "BEEWEB_NODE_BEEGFS_NODE_NAME": "node1",
        },
    )
    assert policy.beegfs
    assert policy.beegfs_service("meta") == (
        "/srv/lab/etc/meta-node1.conf",
        ("setsid", "bash", "/srv/lab x/lab.sh", "restart", "meta"),
        "node1",
    )
    assert policy.beegfs_ctl[1] == "--cfgFile=/etc/beegfs/c.conf"


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("BEEWEB_NODE_BEEGFS", "maybe", "is neither true nor false"),
        ("BEEWEB_NODE_BEEGFS_STORAGE_CONF", "etc/beegfs.conf", "is not an absolute path"),
        ("BEEWEB_NODE_BEEGFS_STORAGE_RESTART", "systemctl 'restart", "cannot be split"),
        ("BEEWEB_BEEGFS_CTL", "   ", None),  # blank: the default
        ("BEEWEB_NODE_BEEGFS_NODE_NAME", "a b;c", "is not a BeeGFS node name"),
    ],
)
def test_malformed_settings_are_improperly_configured(var, value, message):
    if message is None:
        assert nodepolicy.parse("", "", "/d", beegfs={var: value}).beegfs_ctl == ("beegfs-ctl",)
        return
    with pytest.raises(ImproperlyConfigured, match=f"^{var}: .*{message}"):
        nodepolicy.parse("", "", "/d", beegfs={var: value})


def test_a_worker_with_a_malformed_beegfs_setting_does_not_start(tmp_path):
    env = {
        "BEEWEB_DATA_DIR": str(tmp_path),
        "BEEWEB_NODE_BEEGFS": "sometimes",
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "beeweb", "worker", "--pool=solo",
         "-Q", "node.nowhere", "-n", "policy@nowhere"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "BEEWEB_NODE_BEEGFS: 'sometimes' is neither true nor false" in (
        proc.stdout + proc.stderr
    )
