"""ioping adapter: argv, validation, a real run parsed, and a real run through the executor."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from experiments.execution import execute
from experiments.matrices.expansion import expand
from experiments.models import Matrix, Run
from runners.parsers import parse
from runners.tools import ADAPTERS, ParamError, build_command
from tests.helpers.tools import need, run

MIB = 1024**2


def test_default_argv(ctx):
    cmd = build_command("ioping", {}, ctx)
    assert cmd.argv == ["ioping", "-J", "-c", "100", "-i", "0s", "-s", "4k", "-S", "1m",
                        "-a", "1", str(ctx.workdir)]  # fmt: skip
    assert cmd.parse_options == {"op": "read"}
    assert cmd.data_bytes == MIB  # the working set ioping writes first
    assert cmd.dirs == [ctx.workdir]
    assert cmd.files == {} and cmd.prepare == [] and cmd.cwd == ctx.workdir


def test_write_direct_argv(ctx):
    cmd = build_command(
        "ioping",
        {"direction": "write", "count": 20, "size": "64k", "work_size": "16m", "interval": "1s",
         "warmup": 0, "direct": True, "path": "lat/dir"},
        ctx,
    )  # fmt: skip
    assert cmd.argv == ["ioping", "-J", "-c", "20", "-i", "1s", "-s", "64k", "-S", "16m",
                        "-a", "0", "-W", "-D", str(ctx.workdir / "lat/dir")]  # fmt: skip
    assert cmd.parse_options == {"op": "write"}
    assert cmd.dirs == [ctx.workdir / "lat/dir"]
    assert cmd.data_bytes == 16 * MIB


def test_cached_argv(ctx):
    assert build_command("ioping", {"cached": True, "size": 1536}, ctx).argv[6:9] == [
        "-s",
        "1536",
        "-S",
    ]
    assert "-C" in build_command("ioping", {"cached": True}, ctx).argv


def test_modes_and_version_come_from_the_registry(ctx, mpi_ctx):
    assert ADAPTERS["ioping"].modes == ("single",)
    assert ADAPTERS["ioping"].version_argv() == ["ioping", "-v"]
    with pytest.raises(ParamError, match="^mode: ioping cannot run in mpi mode"):
        build_command("ioping", {}, mpi_ctx)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"count": 1}, "count"),
        ({"count": 10001}, "count"),
        ({"count": 3, "warmup": 3}, "count"),
        ({"size": "256"}, "size"),
        ({"size": "2m", "work_size": "1m"}, "size"),
        ({"direct": True, "cached": True}, "cached"),
        ({"interval": "-1"}, "interval"),
        ({"direction": "randread"}, "direction"),
        ({"path": "../up"}, "path"),
        ({"path": "/etc"}, "path"),
        ({"path": "-W"}, "path"),
        ({"target": "/dev/sda"}, "target"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        build_command("ioping", params, ctx)
    assert exc.value.param == param


def test_real_run_parses(ctx):
    need("ioping")
    cmd = build_command("ioping", {"count": 12, "work_size": "256k"}, ctx)
    done = run(cmd)
    assert done.returncode == 0, done.stderr
    result = parse(done.stdout, tool="ioping", **cmd.parse_options)
    assert result.params["count"] == 12 and result.params["transfer_size"] == 4096
    assert result.extra["valid_requests"] == 11 and result.extra["ignored_requests"] == [1]
    lat = {m.stat: m.value for m in result.metrics if m.name == "read_lat"}
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["max"]
    assert result.get("read_iops") > 0
    assert list(ctx.workdir.iterdir()) == []  # ioping's temporary file is gone


@pytest.mark.django_db
def test_executor_runs_ioping(alice, executing_bench):
    need("ioping")
    matrix = Matrix.objects.create(
        owner=alice,
        name="ioping latency",
        tool="ioping",
        fixed_params={"count": 21, "direction": "write", "direct": True, "path": "lat"},
        axes=[],
        repetitions=1,
    )
    matrix.testbeds.set([executing_bench])
    expand(matrix)
    run_ = matrix.runs.get()
    token = uuid.uuid4()
    Run.objects.filter(pk=run_.pk).update(status=Run.Status.QUEUED, dispatch_token=token)
    assert execute.execute(run_.pk, str(token), "w@test") == Run.Status.SUCCEEDED
    run_.refresh_from_db()
    assert run_.tool_version.startswith("ioping ")
    assert run_.argv[:2] == ["ioping", "-J"] and "-W" in run_.argv and "-D" in run_.argv
    assert run_.raw_output.lstrip().startswith("[")  # ioping's JSON, stored as printed
    primary = {m.name: m for m in run_.metrics.filter(primary=True)}
    assert set(primary) == {"write_lat", "write_iops", "write_bw", "elapsed"}
    assert primary["write_lat"].stat == "mean" and primary["write_lat"].unit == "s"
    assert run_.metrics.filter(name="write_lat", stat="p90").exists()  # 20 valid requests
    assert run_.params["count"] == 21 and run_.params["rw"] == "write"
    assert list(Path(executing_bench.benchmark_dir).iterdir()) == []
