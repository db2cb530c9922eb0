"""fio adapter: argv, multihost job files, validation, and real write/read runs."""

from __future__ import annotations

import json
import subprocess

import pytest

from runners.parsers import parse
from runners.progress import progress
from runners.tools import ParamError, build_command
from runners.tools.fio import ADAPTER
from tests.helpers.tools import need, run

MIB = 1024**2


def test_typical_argv(ctx):
    cmd = build_command(
        "fio",
        {"rw": "randwrite", "bs": "4k", "size": "10g", "numjobs": 16, "iodepth": 32,
         "ioengine": "libaio", "direct": True, "runtime": "60", "time_based": True,
         "ramp_time": "5s", "end_fsync": True},
        ctx,
    )  # fmt: skip
    assert cmd.argv == [
        "fio",
        # 16 jobs pooled: json+ carries the histograms their percentiles pool from
        "--output-format=json+",
        "--name=beeweb",
        "--rw=randwrite",
        "--bs=4k",
        "--size=10g",
        "--numjobs=16",
        "--iodepth=32",
        "--ioengine=libaio",
        "--direct=1",
        f"--directory={ctx.workdir}",
        "--nrfiles=1",
        "--filename_format=beeweb.$jobnum.$filenum",
        "--runtime=60",
        "--time_based",
        "--ramp_time=5",
        "--end_fsync=1",
        # fio's own per-second logs, in scratch, for the run page's tool series
        f"--write_bw_log={ctx.scratch}/fio",
        f"--write_iops_log={ctx.scratch}/fio",
        f"--write_lat_log={ctx.scratch}/fio",
        "--log_avg_msec=1000",
        "--log_unix_epoch=1",  # stamped by the wall clock: placed by fio's own clock
        # The JSON result to a file, fio's ETA line on the console (the live throughput)
        f"--output={ctx.scratch}/fio.json",
        "--eta=always",
        "--eta-newline=1",
    ]
    assert cmd.files == {}
    assert cmd.env == {}
    assert cmd.cwd == ctx.workdir
    assert cmd.parse_options == {}
    assert cmd.data_bytes == 16 * 10 * 1024**3
    assert cmd.dirs == [] and cmd.prepare == []  # fio makes its directory and lays out files
    assert cmd.output_file == ctx.scratch / "fio.json"


def test_one_job_keeps_plain_json(ctx):
    """Nothing to pool: plain JSON (its percentiles are fio's own)."""
    cmd = build_command("fio", {"rw": "read", "numjobs": 1}, ctx)
    assert cmd.argv[1] == "--output-format=json"


def test_poisson_arrivals_with_a_new_random_sequence_each_run(ctx):
    cmd = build_command("fio", {"rate": "40k", "rate_process": "poisson", "randrepeat": False}, ctx)
    job = "\n".join(cmd.argv)
    assert "--rate=40k" in job and "--rate_process=poisson" in job and "--randrepeat=0" in job
    default = "\n".join(build_command("fio", {"rate": "40k"}, ctx).argv)
    assert "rate_process" not in default and "randrepeat" not in default  # fio's defaults


def test_mixed_subdirectory_shared_files(ctx):
    cmd = build_command(
        "fio",
        {"rw": "randrw", "rwmixread": 70, "numjobs": 2, "nrfiles": 2, "directory": "fio/run1",
         "file_per_job": False, "fsync_on_close": "yes"},
        ctx,
    )  # fmt: skip
    assert "--rwmixread=70" in cmd.argv
    assert "--fsync_on_close=1" in cmd.argv
    assert "--filename_format=fio/run1/beeweb.$filenum" in cmd.argv
    with pytest.raises(ParamError, match="^keep: is no longer supported"):
        build_command("fio", {"keep": True}, ctx)


def test_multihost_writes_one_job_file_per_client(multihost_ctx):
    cmd = build_command("fio", {"rw": "write", "numjobs": 4, "size": "1g"}, multihost_ctx)
    scratch = multihost_ctx.scratch
    assert cmd.argv == [
        "fio",
        "--output-format=json+",
        "--client=10.0.0.1",
        str(scratch / "fio-0.job"),
        "--client=c2.ib.example",
        str(scratch / "fio-1.job"),
    ]
    job = cmd.files[str(scratch / "fio-0.job")]
    assert job.splitlines() == [
        "[beeweb]",
        "rw=write",
        "bs=1m",
        "size=1g",
        "numjobs=4",
        "iodepth=1",
        "ioengine=psync",
        "direct=0",
        "directory=/mnt/beegfs/bench",
        "nrfiles=1",
        "filename_format=beeweb.c1.$jobnum.$filenum",
    ]
    assert "filename_format=beeweb.c2.$jobnum.$filenum" in cmd.files[str(scratch / "fio-1.job")]
    assert cmd.data_bytes == 2 * 4 * 1024**3


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"numjobs": 0}, "numjobs"),
        ({"numjobs": 100000}, "numjobs"),
        ({"iodepth": 0}, "iodepth"),
        ({"ioengine": "windowsaio"}, "ioengine"),
        ({"rw": "trim"}, "rw"),
        ({"time_based": True}, "runtime"),
        ({"rwmixread": 50}, "rwmixread"),
        ({"rw": "randrw", "rwmixread": 101}, "rwmixread"),
        ({"bs": "2m", "size": "1m"}, "bs"),
        ({"filename": "/dev/sda"}, "filename"),
        ({"rate_process": "poisson"}, "rate_process"),  # without a rate
        ({"rate": "1m", "rate_process": "bursty"}, "rate_process"),
    ],
)
def test_rejected(params, param, ctx):
    with pytest.raises(ParamError) as exc:
        ADAPTER.build(params, ctx)
    assert exc.value.param == param
    assert str(exc.value).startswith(f"{param}: ")


def test_real_write_then_read(ctx, tmp_path):
    need("fio")
    # No runtime: a cap would cut the files short on a machine slower than it assumes.
    params = {"numjobs": 2, "size": "8m", "bs": "1m", "direct": False}
    write = build_command("fio", {**params, "rw": "write"}, ctx)
    done = run(write)
    assert done.returncode == 0, done.stderr
    result = parse(write.output_file.read_text(), tool="fio", **write.parse_options)
    assert result.get("write_bw") > 0
    files = sorted(ctx.workdir.iterdir())
    assert [p.name for p in files] == ["beeweb.0.0", "beeweb.1.0"]
    assert all(p.stat().st_size == 8 * MIB for p in files)

    # A read run starts in an empty directory of its own: fio lays its files out first.
    (tmp_path / "read").mkdir()
    read_ctx = type(ctx)(workdir=tmp_path / "read", scratch=ctx.scratch)
    read = build_command("fio", {**params, "rw": "read"}, read_ctx)
    assert read.prepare == []
    done = run(read)
    assert done.returncode == 0, done.stderr
    result = parse(read.output_file.read_text(), tool="fio", **read.parse_options)
    assert result.get("read_bw") > 0
    assert read.data_bytes == 16 * MIB
    assert len(list(read_ctx.workdir.iterdir())) == 2


def test_result_file_parses_as_stdout_did_and_console_has_eta(ctx):
    """The result file holds exactly the JSON fio used to print on stdout (same parse, same
    metrics), while the console now carries the ETA lines the live throughput reads."""
    need("fio")
    params = {"rw": "write", "size": "16m", "bs": "1m", "runtime": "3", "time_based": True}
    cmd = build_command("fio", params, ctx)
    done = run(cmd)
    assert done.returncode == 0, done.stderr
    text = cmd.output_file.read_text()
    assert json.loads(text)["jobs"][0]["jobname"] == "beeweb"  # nothing but the JSON
    new = parse(text, tool="fio")
    assert "Jobs: 1 (f=1)" in done.stdout and "[eta " in done.stdout
    live = progress("fio", done.stdout)
    assert live is not None and live["op"] == "write" and live["bytes_per_s"] > 0

    # The same job as before this change: JSON on stdout, no --output, no ETA.
    old_argv = [a for a in cmd.argv if not a.startswith(("--output=", "--eta"))]
    old = subprocess.run(old_argv, cwd=cmd.cwd, capture_output=True, text=True, check=False)
    assert old.returncode == 0, old.stderr
    assert "Jobs:" not in old.stdout
    before = parse(old.stdout, tool="fio")
    assert [(m.name, m.unit, m.stat, m.iteration) for m in new.metrics] == [
        (m.name, m.unit, m.stat, m.iteration) for m in before.metrics
    ]
    # Each run's value is its own bytes over its own time (two runs' speeds need not agree).
    for result, output in ((new, text), (before, old.stdout)):
        job = json.loads(output[output.index("{") :])["jobs"][0]["write"]
        assert result.get("write_bw") == pytest.approx(job["io_bytes"] * 1000 / job["runtime"])


def test_multihost_jobs_come_from_numjobs(multihost_ctx):
    multihost_ctx.tasks_per_node = 4
    with pytest.raises(ParamError, match="^tasks_per_node: "):
        build_command("fio", {"numjobs": 2}, multihost_ctx)
    assert (
        "numjobs=4"
        in build_command("fio", {"numjobs": 4}, multihost_ctx).files[
            str(multihost_ctx.scratch / "fio-0.job")
        ]
    )
