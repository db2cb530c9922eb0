"""fio adapter: one job (numjobs clones) from command-line options, or a job file per client."""

from __future__ import annotations

from typing import Any

from runners.sampler import fio_log_options
from runners.tools.base import (
    KEEP_RETIRED,
    Adapter,
    Command,
    LaunchContext,
    Param,
    ParamError,
    format_size,
    params_dict,
)

JOB_NAME = "beeweb"
MIXED = ("readwrite", "randrw")
RESULT_FILE = "fio.json"


class FioAdapter(Adapter):
    """fio with ``--output-format=json`` (what runners.parsers.fio reads best; ``json+``, with
    the latency histograms, when several job reports are pooled: numjobs > 1 or several
    clients), written to a result file in scratch so that the console carries its ETA line
    (the live throughput).

    Files are named by beeweb, not by the user: ``<directory>/beeweb.<jobnum>.<filenum>``
    (``beeweb.<host>.<jobnum>.<filenum>`` per client in multihost mode, so clients sharing a
    file system never share files). fio creates ``directory`` itself because it is part of
    ``filename_format``. Multihost mode talks to ``fio --server`` daemons already running on
    the clients: ``fio --client=<addr> <jobfile> ...``, one job file per client in scratch.
    """

    tool = "fio"
    binary = "fio"
    retired = {"keep": KEEP_RETIRED}
    params = params_dict(
        Param(
            "rw",
            "choice",
            "I/O pattern",
            default="write",
            choices=("read", "write", "randread", "randwrite", "readwrite", "randrw"),
        ),
        Param("bs", "size", "block size of each I/O", default="1m", min=512, max=2**30),
        Param("size", "size", "bytes per job (split over nrfiles)", default="1g", min=4096),
        Param("numjobs", "int", "jobs (processes) per client", default=1, min=1, max=4096),
        Param("iodepth", "int", "I/O queue depth per job", default=1, min=1, max=65536),
        Param(
            "ioengine",
            "choice",
            "I/O engine",
            default="psync",
            choices=("psync", "sync", "libaio", "io_uring", "posixaio", "mmap"),
        ),
        Param("direct", "bool", "O_DIRECT (bypass the page cache)", default=False),
        Param("runtime", "seconds", "stop after this many seconds", min=1),
        Param(
            "time_based", "bool", "run for the whole runtime, looping over the files", default=False
        ),
        Param(
            "rate",
            "size",
            "cap each job's bandwidth (bytes/s): a steady load, or a throttled device",
            min=1024,
        ),
        Param(
            "rate_process",
            "choice",
            "how rated I/O is issued: evenly (linear) or as Poisson arrivals (a real request flow)",
            choices=("linear", "poisson"),
        ),
        Param(
            "randrepeat",
            "bool",
            "the same random sequence (offsets, Poisson arrivals) every run; false: new each run",
            default=True,
        ),
        Param("ramp_time", "seconds", "seconds of warm-up not counted in the results", min=1),
        Param("fsync_on_close", "bool", "fsync each file when closing it", default=False),
        Param("end_fsync", "bool", "fsync the files when the job ends", default=False),
        Param("rwmixread", "int", "percentage of reads for readwrite/randrw", min=0, max=100),
        Param(
            "directory", "path", "directory for the job files, relative to the workdir", default="."
        ),
        Param("nrfiles", "int", "files per job", default=1, min=1, max=100000),
        Param(
            "file_per_job",
            "bool",
            "each job its own files (N-N); false: jobs share (N-1)",
            default=True,
        ),
    )

    def _check(self, p: dict[str, Any], ctx: LaunchContext | None) -> None:
        if p["time_based"] and p["runtime"] is None:
            raise ParamError("runtime", "time_based needs a runtime")
        if p["rate_process"] is not None and p["rate"] is None:
            raise ParamError("rate_process", "only applies to rated I/O: set rate too")
        if p["rwmixread"] is not None and p["rw"] not in MIXED:
            raise ParamError("rwmixread", f"only applies to rw={' or rw='.join(MIXED)}")
        if p["bs"] > p["size"] // p["nrfiles"]:
            raise ParamError("bs", "is larger than the size of each file (size / nrfiles)")
        if (
            ctx is not None
            and ctx.mode == "multihost"
            and ctx.tasks_per_node
            not in (
                1,
                p["numjobs"],
            )
        ):
            raise ParamError(
                "tasks_per_node", "fio takes jobs per client from 'numjobs'; leave it at 1"
            )

    def _filename_format(self, p: dict[str, Any], host: str | None) -> str:
        parts = [JOB_NAME] + ([host] if host else [])
        if p["file_per_job"]:
            parts.append("$jobnum")
        parts.append("$filenum")
        name = ".".join(parts)
        return name if p["directory"] == "." else f"{p['directory']}/{name}"

    def _options(self, p: dict[str, Any], ctx: LaunchContext, host: str | None) -> list[str]:
        """Job options as ``key=value`` (or bare ``key``) in fio's own syntax."""
        opts = [
            f"rw={p['rw']}",
            f"bs={format_size(p['bs'])}",
            f"size={format_size(p['size'])}",
            f"numjobs={p['numjobs']}",
            f"iodepth={p['iodepth']}",
            f"ioengine={p['ioengine']}",
            f"direct={int(p['direct'])}",
            f"directory={ctx.workdir}",
            f"nrfiles={p['nrfiles']}",
            f"filename_format={self._filename_format(p, host)}",
        ]
        if p["runtime"] is not None:
            opts.append(f"runtime={p['runtime']}")
        if p["time_based"]:
            opts.append("time_based")
        if p["ramp_time"] is not None:
            opts.append(f"ramp_time={p['ramp_time']}")
        if p["rate"] is not None:
            opts.append(f"rate={format_size(p['rate'])}")
        if p["rate_process"] is not None:
            opts.append(f"rate_process={p['rate_process']}")
        if not p["randrepeat"]:
            opts.append("randrepeat=0")
        if p["fsync_on_close"]:
            opts.append("fsync_on_close=1")
        if p["end_fsync"]:
            opts.append("end_fsync=1")
        if p["rwmixread"] is not None:
            opts.append(f"rwmixread={p['rwmixread']}")
        return opts

    def _build(self, p: dict[str, Any], ctx: LaunchContext) -> Command:
        # Several job reports (numjobs > 1, or one per client) are pooled into the run's
        # values, and latency percentiles pool only through fio's histograms: json+ adds
        # them (clat bins), plain json leaves them out and the run would have none.
        pooled = p["numjobs"] > 1 or ctx.mode == "multihost"
        argv = [self.binary, "--output-format=json+" if pooled else "--output-format=json"]
        files: dict[str, str] = {}
        output_file = None
        if ctx.mode == "multihost":
            for index, host in enumerate(ctx.hosts):
                jobfile = ctx.scratch / f"fio-{index}.job"
                body = "".join(f"{o}\n" for o in self._options(p, ctx, host.name))
                files[str(jobfile)] = f"[{JOB_NAME}]\n{body}"
                argv += [f"--client={host.address}", str(jobfile)]
        else:
            argv.append(f"--name={JOB_NAME}")
            argv += [f"--{o}" for o in self._options(p, ctx, None)]
            # Its bandwidth/IOPS/latency per second, the run page's tool series.
            argv += fio_log_options(ctx.scratch)
            # The JSON result goes to a file so that the console can carry fio's ETA line
            # once a second: the live throughput (runners.progress). With JSON on stdout fio
            # prints no ETA at all, so the live tail used to stay empty until the end.
            output_file = ctx.scratch / RESULT_FILE
            argv += [f"--output={output_file}", "--eta=always", "--eta-newline=1"]
        return Command(
            argv=argv,
            files=files,
            env={},
            cwd=ctx.workdir,
            parse_options={},
            data_bytes=p["size"] * p["numjobs"] * ctx.nodes,
            output_file=output_file,
        )


ADAPTER = FioAdapter()
