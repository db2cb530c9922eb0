"""The metric vocabulary: every name a parser may emit, in one table.

Each metric has its base unit (DESIGN.md: ``B/s``, ``op/s``, ``s``, ``B``), the operation it
measures (``direction``), what kind of quantity it is, whether more is better, which
theoretical limit of a testbed applies to it (``limit``: its read or write bandwidth), a human
label for charts and a verb for the comparison's sentences ("x86 *writes* 12% faster").

Parsers (``runners.parsers.base.METRIC_UNITS``), ingest validation and the comparison (units,
limits, verbs, labels, higher-is-better) all read this table. Pure Python: no Django.

To add a metric, add one ``M(...)`` line below (and a row to DESIGN.md's table).
"""

from __future__ import annotations

from dataclasses import dataclass

# What a metric measures; ``direction`` says which operation.
KINDS = ("bandwidth", "rate", "latency", "time", "score", "utilisation")
DIRECTIONS = ("read", "write", "trim", "any", "metadata", "network", "whole run")
LIMITS = ("read", "write")


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: str  # base unit
    kind: str
    direction: str
    label: str = ""  # "" -> spelled out from the name ("rc_rdma_write_bw" -> "RC RDMA write …")
    verb: str = ""  # for sentences: "x86 writes 12% faster than Arm"; "" -> "is … faster in"
    limit: str | None = None  # the testbed limit (read or write bandwidth) that bounds it
    higher_is_better: bool | None = None  # None -> unless the unit is seconds

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"{self.name}: unknown direction {self.direction!r}")
        if self.limit is not None and (self.limit not in LIMITS or self.unit != "B/s"):
            raise ValueError(f"{self.name}: a limit is 'read' or 'write' on a B/s metric")
        if not self.label:
            object.__setattr__(self, "label", spell(self.name))
        if self.higher_is_better is None:
            object.__setattr__(self, "higher_is_better", self.unit != "s")


# Words of spelled-out labels.
_SUFFIXES = {"bw": "bandwidth", "lat": "latency", "iops": "IOPS", "msg_rate": "message rate"}
_WORDS = {
    "tcp": "TCP",
    "udp": "UDP",
    "sdp": "SDP",
    "rc": "RC",
    "uc": "UC",
    "ud": "UD",
    "rdma": "RDMA",
    "ib": "InfiniBand",
    "ior": "IOR",
    "rnd4k": "random 4k",
    "rnd1m": "random 1m",
}


def spell(name: str) -> str:
    """ "rc_rdma_write_bw" -> "RC RDMA write bandwidth" (a label from the name's parts)."""
    words = name.split("_")
    tail = ""
    for suffix, text in _SUFFIXES.items():
        if name.endswith("_" + suffix):
            words = name[: -len(suffix) - 1].split("_")
            tail = text
            break
    text = " ".join([_WORDS.get(w, w) for w in words if w] + ([tail] if tail else []))
    return text[:1].upper() + text[1:] if text else name


def _bw(name, direction, label="", verb="", limit=None, kind="bandwidth", unit="B/s"):
    return MetricDef(name, unit, kind, direction, label, verb, limit)


M = MetricDef
METRICS: tuple[MetricDef, ...] = (
    # File and block I/O bandwidth (IOR, fio, dd, IOzone, elbencho, StorageBench, ioping).
    _bw("write_bw", "write", "Write throughput", "writes", limit="write"),
    _bw("read_bw", "read", "Read throughput", "reads", limit="read"),
    _bw("rewrite_bw", "write", "Rewrite throughput", "rewrites", limit="write"),
    _bw("reread_bw", "read", "Re-read throughput", "re-reads", limit="read"),
    _bw("randwrite_bw", "write", "Random write throughput", "writes randomly", limit="write"),
    _bw("randread_bw", "read", "Random read throughput", "reads randomly", limit="read"),
    _bw("bkwdread_bw", "read", "Backward read throughput"),
    _bw("recwrite_bw", "write", "Record rewrite throughput"),
    _bw("strideread_bw", "read", "Stride read throughput"),
    _bw("fwrite_bw", "write", "fwrite() throughput"),
    _bw("frewrite_bw", "write", "fwrite() rewrite throughput"),
    _bw("fread_bw", "read", "fread() throughput"),
    _bw("freread_bw", "read", "fread() re-read throughput"),
    _bw("pwrite_bw", "write", "pwrite() throughput"),
    _bw("pread_bw", "read", "pread() throughput"),
    _bw("bw", "any", "Throughput, direction not stated", "transfers"),
    # Operations per second and latency of I/O calls.
    M("write_iops", "op/s", "rate", "write", "Write IOPS", "writes"),
    M("read_iops", "op/s", "rate", "read", "Read IOPS", "reads"),
    M("trim_iops", "op/s", "rate", "trim", "Trim IOPS"),
    M("write_lat", "s", "latency", "write", "Write latency"),
    M("read_lat", "s", "latency", "read", "Read latency"),
    M("write_open_lat", "s", "latency", "write", "Write open latency"),
    M("read_open_lat", "s", "latency", "read", "Read open latency"),
    M("write_close_lat", "s", "latency", "write", "Write close latency"),
    M("read_close_lat", "s", "latency", "read", "Read close latency"),
    M("write_time", "s", "time", "write", "Write time"),
    M("read_time", "s", "time", "read", "Read time"),
    # Metadata operations (mdtest, elbencho).
    M("dir_create", "op/s", "rate", "metadata", "Directory creates", "creates directories"),
    M("dir_stat", "op/s", "rate", "metadata", "Directory stats", "stats directories"),
    M("dir_rename", "op/s", "rate", "metadata", "Directory renames", "renames directories"),
    M("dir_remove", "op/s", "rate", "metadata", "Directory removals", "removes directories"),
    M("file_create", "op/s", "rate", "metadata", "File creates", "creates files"),
    M("file_stat", "op/s", "rate", "metadata", "File stats", "stats files"),
    M("file_read", "op/s", "rate", "metadata", "File reads", "reads files"),
    M("file_remove", "op/s", "rate", "metadata", "File removals", "removes files"),
    M("file_rename", "op/s", "rate", "metadata", "File renames"),
    M("tree_create", "op/s", "rate", "metadata", "Tree creates", "creates trees"),
    M("tree_remove", "op/s", "rate", "metadata", "Tree removals", "removes trees"),
    # Network (qperf, perftest).
    _bw("tcp_bw", "network"),
    _bw("udp_bw", "network"),
    _bw("udp_send_bw", "network"),
    _bw("udp_recv_bw", "network"),
    _bw("sdp_bw", "network"),
    _bw("rc_bw", "network"),
    _bw("uc_bw", "network"),
    _bw("ud_bw", "network"),
    _bw("rc_rdma_write_bw", "network"),
    _bw("rc_rdma_read_bw", "network"),
    _bw("uc_rdma_write_bw", "network"),
    M("tcp_lat", "s", "latency", "network"),
    M("udp_lat", "s", "latency", "network"),
    M("sdp_lat", "s", "latency", "network"),
    M("rc_lat", "s", "latency", "network"),
    M("uc_lat", "s", "latency", "network"),
    M("ud_lat", "s", "latency", "network"),
    M("rc_rdma_write_lat", "s", "latency", "network"),
    M("rc_rdma_read_lat", "s", "latency", "network"),
    M("uc_rdma_write_lat", "s", "latency", "network"),
    _bw("ib_write_bw", "network"),
    _bw("ib_read_bw", "network"),
    _bw("ib_send_bw", "network"),
    M("ib_write_msg_rate", "op/s", "rate", "network"),
    M("ib_read_msg_rate", "op/s", "rate", "network"),
    M("ib_send_msg_rate", "op/s", "rate", "network"),
    # io500 phases (bandwidth phases in B/s, metadata phases in op/s) and its scores.
    M("io500_score", "score", "score", "whole run", "IO500 score"),
    M("io500_bw_score", "B/s", "score", "whole run", "IO500 bandwidth score"),
    M("io500_md_score", "op/s", "score", "metadata", "IO500 metadata score"),
    _bw("ior_easy_write", "write"),
    _bw("ior_easy_read", "read"),
    _bw("ior_hard_write", "write"),
    _bw("ior_hard_read", "read"),
    _bw("ior_rnd4k_read", "read"),
    _bw("ior_rnd1m_read", "read"),
    M("mdtest_easy_write", "op/s", "rate", "metadata"),
    M("mdtest_easy_stat", "op/s", "rate", "metadata"),
    M("mdtest_easy_delete", "op/s", "rate", "metadata"),
    M("mdtest_hard_write", "op/s", "rate", "metadata"),
    M("mdtest_hard_read", "op/s", "rate", "metadata"),
    M("mdtest_hard_stat", "op/s", "rate", "metadata"),
    M("mdtest_hard_delete", "op/s", "rate", "metadata"),
    M("find", "op/s", "rate", "metadata"),
    M("find_easy", "op/s", "rate", "metadata"),
    M("find_hard", "op/s", "rate", "metadata"),
    # Elapsed time of a whole phase as a tool prints it (elbencho, dd, mdtest, io500).
    M("elapsed", "s", "time", "whole run"),
    M("cpu_util", "%", "utilisation", "whole run", "CPU utilisation"),
)

BY_NAME: dict[str, MetricDef] = {m.name: m for m in METRICS}
if len(BY_NAME) != len(METRICS):  # pragma: no cover - caught by the tests at once
    raise ValueError("a metric is defined twice")

# Name -> base unit: what parsers may emit (``ParseResult.validate``) and ingest accepts.
UNITS: dict[str, str] = {m.name: m.unit for m in METRICS}
# Bandwidth metrics and the direction whose theoretical limit applies.
LIMIT_OPS: dict[str, str] = {m.name: m.limit for m in METRICS if m.limit}
# Verbs of the comparison's sentences.
VERBS: dict[str, str] = {m.name: m.verb for m in METRICS if m.verb}
# Human names for chart titles and axes (the API keeps the metric names themselves).
LABELS: dict[str, str] = {m.name: m.label for m in METRICS}


def get(name: str) -> MetricDef | None:
    return BY_NAME.get(name)


def unit(name: str) -> str | None:
    """The base unit of a metric, None for a name outside the vocabulary."""
    metric = BY_NAME.get(name)
    return metric.unit if metric else None


def label(name: str) -> str:
    """ "write_bw" -> "Write throughput"; a name outside the vocabulary is spelled out."""
    metric = BY_NAME.get(name)
    return metric.label if metric else spell(name)


def higher_is_better(name: str) -> bool:
    """Whether more of it is better (latencies and times: no); True for an unknown name."""
    metric = BY_NAME.get(name)
    return bool(metric.higher_is_better) if metric else True
