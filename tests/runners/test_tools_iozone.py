"""IOzone adapter: throughput-mode argv, the -+m client file, validation, a real run."""

from __future__ import annotations

import pytest

from runners.parsers import parse
from runners.tools import ParamError, build_command
from runners.tools.iozone import iozone_size
from tests.helpers.tools import need, run

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def test_sizes_always_carry_a_unit():
    assert iozone_size(4 * KIB) == "4k"
    assert iozone_size(MIB) == "1m"
    assert iozone_size(10 * GIB) == "10g"
    assert iozone_size(1536 * KIB) == "1536k"


def test_study_command_single_node(ctx):
    """iozone -i 0 -i 1 -c -e -w -r 1m -I -s $Size -t $Thread -+n, files inside the workdir."""
    cmd = build_command(
        "iozone",
        {"tests": [0, 1], "include_close": True, "include_flush": True,
         "record_size": "1m", "direct": True, "file_size": "10g", "threads": 4,
         "no_retests": True, "directory": "iozone"},
        ctx,
    )  # fmt: skip
    files = [str(ctx.workdir / f"iozone/iozone.{n}.tmp") for n in range(4)]
    assert cmd.argv == ["iozone", "-i", "0", "-i", "1", "-r", "1m", "-s", "10g", "-t", "4",
                        "-I", "-e", "-c", "-+n", "-F", *files]  # fmt: skip
    assert cmd.data_bytes == 40 * GIB
    assert cmd.dirs == [ctx.workdir / "iozone"]
    assert cmd.env == {}


def test_random_ops(ctx):
    cmd = build_command(
        "iozone", {"tests": "2", "record_size": "4K", "file_size": "1g", "ops": True}, ctx
    )
    assert cmd.argv[:11] == ["iozone", "-i", "2", "-r", "4k", "-s", "1g", "-t", "1", "-O", "-F"]
    assert cmd.argv[11] == str(ctx.workdir / "iozone.0.tmp")


def test_multihost_client_file(multihost_ctx):
    multihost_ctx.tasks_per_node = 2
    cmd = build_command("iozone", {"file_size": "1g"}, multihost_ctx)
    clients = multihost_ctx.scratch / "clients"
    assert cmd.argv == ["iozone", "-i", "0", "-i", "1", "-r", "1m", "-s", "1g", "-t", "4",
                        "-+m", str(clients)]  # fmt: skip
    assert cmd.env == {"RSH": "ssh"}
    lines = [line.split() for line in cmd.files[str(clients)].splitlines()]
    assert [line[0] for line in lines] == ["10.0.0.1", "10.0.0.1", "c2.ib.example",
                                           "c2.ib.example"]  # fmt: skip
    assert all(line[1] == "/mnt/beegfs/bench" and line[2].endswith("iozone") for line in lines)
    assert [line[3] for line in lines] == [
        "/mnt/beegfs/bench/iozone.c1.0.tmp",
        "/mnt/beegfs/bench/iozone.c1.1.tmp",
        "/mnt/beegfs/bench/iozone.c2.0.tmp",
        "/mnt/beegfs/bench/iozone.c2.1.tmp",
    ]
    assert cmd.data_bytes == 4 * GIB


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"tests": [13]}, "tests"),
        ({"tests": []}, "tests"),
        ({"record_size": "1536"}, "record_size"),
        ({"record_size": "2m", "file_size": "1m"}, "record_size"),
        ({"threads": 0}, "threads"),
        ({"threads": 100000}, "threads"),
        ({"-+m": "/etc/hosts"}, "-+m"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("iozone", params, ctx)
    assert exc.value.param == param


def test_threads_belong_to_tasks_per_node_in_multihost(multihost_ctx):
    with pytest.raises(ParamError, match="^threads: "):
        build_command("iozone", {"threads": 4}, multihost_ctx)


@pytest.mark.slow  # IOzone sleeps a few seconds around each test in throughput mode
def test_real_run(ctx):
    need("iozone")
    cmd = build_command(
        "iozone",
        {"tests": [0, 1], "file_size": "4m", "record_size": "64k", "threads": 2,
         "no_retests": True},
        ctx,
    )  # fmt: skip
    done = run(cmd)
    assert done.returncode == 0, done.stderr
    result = parse(done.stdout, tool="iozone", **cmd.parse_options)
    assert result.get("write_bw") > 0
    assert result.get("read_bw") > 0
    assert result.params["threads"] == 2
    assert list(ctx.workdir.iterdir()) == []  # iozone removes its files itself (no -w)
