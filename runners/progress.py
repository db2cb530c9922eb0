"""Current throughput of a running tool, read from the output it has printed so far.

The run page and the matrix page show it while a run goes (issue 16: the live tail of a fio
run used to stay empty until it ended). Each function here is pure: ``text`` is the run's
``raw_output`` as streamed by ``experiments.execution.execute._supervise`` (possibly cut at the
front), and
the answer is the tool's latest progress report, or None when it has printed none yet:

``{"op": "write", "bytes_per_s": 20971520.0, "iops": 20.0 | None, "percent": 57.1 | None,
"text": "write 21.0 MB/s · 20 IOPS · 57%"}``

- fio prints its ETA line about once a second (``--eta=always --eta-newline=1``, which the
  adapter asks for while its JSON result goes to a file): the latest interval's rates.
- IOzone prints one "Children see throughput" line as each test of a throughput run ends
  (it flushes per test even when stdout is a file): the latest finished test.
- IOR prints one result row per access and iteration (``write 129.65 2075.05 ...``, bw in
  MiB/s first): the latest finished phase.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# fio's ETA line: "Jobs: 1 (f=1): [W(1)][57.1%][w=20.0MiB/s][w=20 IOPS][eta 00m:03s]";
# mixed workloads "[r=10.0MiB/s,w=9.9MiB/s][r=10,w=9 IOPS]".
FIO_ETA = re.compile(
    r"\]\[(?P<pct>[\d.]+|-\.-)%\]"
    r"\[(?P<bw>(?:[rwt]=[\d.]+[KMGTP]?i?B/s,?)+)\]"
    r"\[(?P<iops>(?:[rwt]=[\d.]+[kMG]?,?)+) IOPS\]"
)
FIO_RATE = re.compile(r"([rwt])=([\d.]+)([KMGTP]?)(i?)B/s")
FIO_IOPS = re.compile(r"([rwt])=([\d.]+)([kMG]?)")
FIO_OPS = {"r": "read", "w": "write", "t": "trim"}
# How much of the end of the output the pages read for it: a few hundred fio lines.
TAIL_CHARS = 16384
PREFIX = {"": 0, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5}

# IOzone: "Children see throughput for  4 initial writers 	=  138676.27 kB/sec" (kB = 1024 B;
# "ops/sec" with -O).
IOZONE_LINE = re.compile(
    r"Children see throughput for\s+\d+\s+(?P<test>[\w -]+?)\s*=\s*(?P<value>[\d.]+)\s+"
    r"(?P<unit>kB/sec|ops/sec)"
)
# IOR result rows: access, then bw(MiB/s) in every version's table (and in the summary's Max).
IOR_ROW = re.compile(r"^(?P<op>write|read)\s+(?P<bw>\d+(?:\.\d+)?)\s", re.MULTILINE)


def _rate_text(bytes_per_s: float) -> str:
    """Decimal units as everywhere in beeweb (DESIGN.md): MB/s below 1 GB/s, GB/s above."""
    if bytes_per_s >= 1e9:
        return f"{bytes_per_s / 1e9:.2f} GB/s"
    return f"{bytes_per_s / 1e6:.1f} MB/s"


def _scaled(value: str, prefix: str, base: int) -> float:
    return float(value) * base ** PREFIX[prefix]


def fio(text: str) -> dict | None:
    """The latest complete ETA line of fio (lines end in ``\\r`` or ``\\n``)."""
    for line in reversed(re.split(r"[\r\n]+", text)):
        match = FIO_ETA.search(line)
        if match is None:
            continue
        rates: dict[str, float] = {}
        for op, value, prefix, binary in FIO_RATE.findall(match["bw"]):
            rates[FIO_OPS[op]] = _scaled(value, prefix, 1024 if binary else 1000)
        iops: dict[str, float] = {}
        for op, value, prefix in FIO_IOPS.findall(match["iops"]):
            iops[FIO_OPS[op]] = _scaled(value, prefix, 1000)
        # The busiest direction leads (a mixed run shows both in the text).
        op = max(rates, key=lambda k: rates[k])
        parts = [f"{name} {_rate_text(bw)}" for name, bw in rates.items()]
        total_iops = sum(iops.values()) if iops else None
        if total_iops is not None:
            parts.append(f"{total_iops:g} IOPS")
        # "-.-%" when fio cannot tell (a rate-limited or mixed time-based job at its end).
        percent = None if match["pct"] == "-.-" else float(match["pct"])
        if percent is not None:
            parts.append(f"{percent:.0f}%")
        return {
            "op": op,
            "bytes_per_s": sum(rates.values()),
            "iops": total_iops,
            "percent": percent,
            "text": " · ".join(parts),
        }
    return None


def iozone(text: str) -> dict | None:
    """The throughput of the latest finished IOzone test (all its children together)."""
    matches = list(IOZONE_LINE.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    test, value = last["test"].strip(), float(last["value"])
    if last["unit"] == "ops/sec":
        return {
            "op": test,
            "bytes_per_s": None,
            "iops": value,
            "percent": None,
            "text": f"{test} {value:g} op/s",
        }
    bytes_per_s = value * 1024
    return {
        "op": test,
        "bytes_per_s": bytes_per_s,
        "iops": None,
        "percent": None,
        "text": f"{test} {_rate_text(bytes_per_s)}",
    }


def ior(text: str) -> dict | None:
    """The bandwidth of IOR's latest result row."""
    matches = list(IOR_ROW.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    bytes_per_s = float(last["bw"]) * 2**20
    return {
        "op": last["op"],
        "bytes_per_s": bytes_per_s,
        "iops": None,
        "percent": None,
        "text": f"{last['op']} {_rate_text(bytes_per_s)}",
    }


PROGRESS: dict[str, Callable[[str], dict | None]] = {"fio": fio, "iozone": iozone, "ior": ior}


def progress(tool: str, text: str) -> dict | None:
    """The current throughput of a run of ``tool`` from its output so far; None for a tool
    that reports none (or has not yet)."""
    function = PROGRESS.get(tool)
    if function is None or not text:
        return None
    return function(text)
