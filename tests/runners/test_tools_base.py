"""Adapter framework: parameter kinds, ParamError, the registry, launch modes, mpirun wrapper."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from runners import registry
from runners.tools import (
    ADAPTERS,
    Adapter,
    Command,
    Host,
    LaunchContext,
    ParamError,
    build_command,
    get_adapter,
)
from runners.tools.base import (
    Param,
    check_context,
    clean_bool,
    clean_host,
    clean_int,
    clean_path,
    clean_seconds,
    clean_size,
    format_size,
    mpi_launch,
)
from tests.helpers.tools import HOSTS

KIB, MIB, GIB = 1024, 1024**2, 1024**3
# Every runnable tool of the registry: a new one is covered by the tests below as it is added.
TOOLS = [t.name for t in registry.runnable()]


def test_param_error_names_the_parameter():
    err = ParamError("numjobs", "0 is below the minimum 1")
    assert str(err) == "numjobs: 0 is below the minimum 1"
    assert err.param == "numjobs"
    assert err.message == "0 is below the minimum 1"
    assert isinstance(err, ValueError)


def test_registry_holds_every_tool_with_one_shape():
    assert set(TOOLS) >= {"fio", "dd", "ior", "mdtest", "iozone", "qperf", "elbencho"}
    assert sorted(ADAPTERS) == sorted(TOOLS)
    for name, adapter in ADAPTERS.items():
        assert isinstance(adapter, Adapter)
        assert adapter.tool == name
        assert adapter.binary
        assert adapter.modes and set(adapter.modes) <= {"single", "mpi", "multihost"}
        assert "single" in adapter.modes
        assert all(p.name == key for key, p in adapter.params.items())
        assert get_adapter(name) is adapter


def test_unknown_tool_is_a_param_error():
    with pytest.raises(ParamError) as exc:
        get_adapter("bonnie++")
    assert exc.value.param == "tool"
    assert "unknown tool 'bonnie++'" in str(exc.value)
    with pytest.raises(ParamError, match="^tool: "):
        build_command("nope", {}, LaunchContext(Path("/w"), Path("/s")))


@pytest.mark.parametrize("tool", TOOLS)
def test_describe_is_json_ready_and_complete(tool):
    rows = ADAPTERS[tool].describe()
    assert [r["name"] for r in rows] == list(ADAPTERS[tool].params)
    for row in rows:
        assert {"name", "kind", "help", "default", "choices", "min", "max"} <= set(row)
        assert row["help"]
    json.dumps(rows)


@pytest.mark.parametrize("tool", TOOLS)
def test_defaults_validate_and_validation_is_idempotent(tool, ctx):
    adapter = ADAPTERS[tool]
    given = {"server": "127.0.0.1"} if tool == "qperf" else {}
    first = adapter.validate(given, ctx)
    assert set(first) == set(adapter.params)
    assert adapter.validate(first, ctx) == first
    assert isinstance(adapter.build(first, ctx), Command)


@pytest.mark.parametrize("tool", TOOLS)
def test_version_argv_is_a_list_or_none(tool):
    argv = ADAPTERS[tool].version_argv()
    assert argv is None or (argv[0] == ADAPTERS[tool].binary and len(argv) == 2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", 512),
        (512, 512),
        ("4k", 4 * KIB),
        ("4K", 4 * KIB),
        ("4KiB", 4 * KIB),
        ("4kb", 4 * KIB),
        ("1m", MIB),
        ("1M", MIB),
        ("2g", 2 * GIB),
        ("1.5m", 3 * MIB // 2),
        ("1t", 1024 * GIB),
        ("100b", 100),
    ],
)
def test_sizes(text, expected):
    assert clean_size(text, "bs") == expected


@pytest.mark.parametrize(
    "text", ["", "1x", "k", "-1", "1.5", "4 k", "0x10", "٣k", "4k\n", "9" * 5000, True, 1.5, None]
)
def test_bad_sizes(text):
    with pytest.raises(ParamError, match="^bs: "):
        clean_size(text, "bs")


def test_size_bounds():
    with pytest.raises(ParamError, match="below the minimum"):
        clean_size("256", "bs", lo=512)
    with pytest.raises(ParamError, match="above the maximum"):
        clean_size("2g", "bs", hi=GIB)


@pytest.mark.parametrize(("text", "seconds"), [(30, 30), ("30", 30), ("30s", 30), ("5m", 300)])
def test_seconds(text, seconds):
    assert clean_seconds(text, "runtime") == seconds


def test_ints_and_bools():
    assert clean_int("12", "numjobs") == 12
    assert clean_int(4.0, "numjobs") == 4
    for bad in (True, "1.5", "twelve", 1.5, "-3", "٣", "3\n", "9" * 5000, 2**64):
        with pytest.raises(ParamError, match="^numjobs: "):
            clean_int(bad, "numjobs", 1)
    assert clean_bool("yes", "direct") is True
    assert clean_bool(0, "direct") is False
    with pytest.raises(ParamError, match="^direct: "):
        clean_bool("maybe", "direct")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("node01", "node01"),
        ("node01.ib.example.org", "node01.ib.example.org"),
        ("10.1.2.3", "10.1.2.3"),
        ("fe80:0:0::1", "fe80::1"),
    ],
)
def test_hosts(text, expected):
    assert clean_host(text, "server") == expected


@pytest.mark.parametrize(
    "text", ["-oProxyCommand=x", "a b", "node_01", "999.1.1.1", "fe80::1%eth0", "a;b", "x" * 300]
)
def test_bad_hosts(text):
    with pytest.raises(ParamError, match="^server: "):
        clean_host(text, "server")


def test_host_dataclass_checks_its_fields():
    assert Host("c1", "10.0.0.1").address == "10.0.0.1"
    with pytest.raises(ParamError, match="^hosts: "):
        Host("c1", "$(reboot)")
    with pytest.raises(ParamError, match="^hosts: "):
        Host("c1\nc2", "10.0.0.1")


def test_paths_are_relative_to_the_workdir(tmp_path):
    assert clean_path("sub/file", "file", tmp_path) == "sub/file"
    assert clean_path(str(tmp_path / "a" / "b"), "file", tmp_path) == "a/b"
    assert clean_path(".", "file", tmp_path) == "."
    assert clean_path("a/../b", "file", tmp_path) == "b"
    assert clean_path(tmp_path, "file", tmp_path) == "."
    # Without a workdir only the text can be judged.
    assert clean_path("a//b/", "file") == "a/b"
    with pytest.raises(ParamError, match="leaves"):
        clean_path("a/../../b", "file")


def test_list_params_split_and_deduplicate():
    p = Param("tests", "list", "t", choices=("0", "1", "2"))
    assert p.clean("0, 1,1") == ["0", "1"]
    assert p.clean([0, 2]) == ["0", "2"]
    ids = Param("targetids", "list", "t", item="int", min=1, max=9)
    assert ids.clean("3,1") == [3, 1]
    with pytest.raises(ParamError, match="^targetids: "):
        ids.clean([0])


def test_choice_is_case_insensitive_and_canonical(ctx):
    clean = ADAPTERS["ior"].validate({"api": "mpiio"}, ctx)
    assert clean["api"] == "MPIIO"


def test_format_size():
    assert format_size(4096) == "4k"
    assert format_size(MIB) == "1m"
    assert format_size(3 * GIB, upper=True) == "3G"
    assert format_size(1536) == "1536"
    assert format_size(1536 * KIB) == "1536k"
    assert format_size(512) == "512"


def test_required_parameter(ctx):
    with pytest.raises(ParamError) as exc:
        ADAPTERS["qperf"].validate({}, ctx)
    assert str(exc.value) == "server: is required"


def test_params_must_be_a_mapping(ctx):
    with pytest.raises(ParamError, match="^params: "):
        ADAPTERS["fio"].validate(["rw", "write"], ctx)


# --- launch context ------------------------------------------------------------------------


def test_mode_the_tool_lacks(ctx):
    ctx.mode = "mpi"
    ctx.hosts = HOSTS
    with pytest.raises(ParamError) as exc:
        ADAPTERS["fio"].build({}, ctx)
    assert exc.value.param == "mode"
    assert "fio cannot run in mpi mode" in str(exc.value)
    ctx.mode = "cluster"
    with pytest.raises(ParamError, match="^mode: 'cluster' is not one of"):
        ADAPTERS["fio"].build({}, ctx)


@pytest.mark.parametrize(
    ("tool", "mode"),
    [
        ("ior", "mpi"),
        ("mdtest", "mpi"),
        ("fio", "multihost"),
        ("iozone", "multihost"),
        ("elbencho", "multihost"),
    ],
)
def test_mpi_and_multihost_need_hosts(tool, mode, ctx):
    ctx.mode = mode
    with pytest.raises(ParamError) as exc:
        ADAPTERS[tool].build({}, ctx)
    assert exc.value.param == "hosts"


def test_context_checks(ctx):
    bad = [
        ({"workdir": Path("relative")}, "workdir"),
        ({"scratch": "/tmp"}, "scratch"),
        ({"workdir": Path("/mnt/a:b")}, "workdir"),
        ({"scratch": Path("/tmp/a\nb")}, "scratch"),
        ({"tasks_per_node": 0}, "tasks_per_node"),
        ({"mpirun": "mpirun; reboot"}, "mpirun"),
        ({"mode": "mpi", "hosts": ("10.0.0.1",)}, "hosts"),
        ({"mode": "mpi", "hosts": (HOSTS[0], HOSTS[0])}, "hosts"),
    ]
    for changes, param in bad:
        trial = LaunchContext(**{**ctx.__dict__, **changes})
        with pytest.raises(ParamError) as exc:
            check_context(trial, ("single", "mpi"), "ior")
        assert exc.value.param == param, changes
    with pytest.raises(ParamError, match="^context: "):
        ADAPTERS["dd"].build({}, None)


def test_mpi_launch_wrapper(tmp_path):
    ctx = LaunchContext(Path("/w"), tmp_path, mode="mpi", hosts=HOSTS, tasks_per_node=3)
    argv, files = mpi_launch(["ior", "-w"], ctx)
    assert argv == [
        "mpirun", "--allow-run-as-root", "--hostfile", str(tmp_path / "hostfile"), "-np", "6",
        "--map-by", "ppr:3:node", "ior", "-w",
    ]  # fmt: skip
    assert files == {str(tmp_path / "hostfile"): "10.0.0.1 slots=3\nc2.ib.example slots=3\n"}
    ctx.mpirun = "/opt/openmpi/bin/mpirun"
    argv, _ = mpi_launch(["ior"], ctx)
    assert argv[:2] == ["/opt/openmpi/bin/mpirun", "--allow-run-as-root"]


def test_mpi_launch_runs_for_real_on_localhost(tmp_path):
    """The wrapper's argv and hostfile drive a real Open MPI launch (2 ranks on this node)."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun not installed")
    ctx = LaunchContext(
        tmp_path, tmp_path, mode="mpi", hosts=(Host("localhost", "localhost"),),
        tasks_per_node=2,
    )  # fmt: skip
    argv, files = mpi_launch(["hostname"], ctx)
    for path, content in files.items():
        Path(path).write_text(content)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("Open MPI did not finish within 120 s in this container")
    if done.returncode != 0 and "plm" in done.stderr.lower():
        print(f"Open MPI cannot launch here: {done.stderr.strip()}")
        pytest.skip("Open MPI cannot launch processes in this container")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 2
