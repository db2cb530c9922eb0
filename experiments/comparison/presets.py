"""The published comparisons, each pinned to the studies it is about (``f=source:…``), with
the statements a reviewer of the source papers would accept (checked by hand: see the
tests in tests/experiments/test_presets.py)."""

from __future__ import annotations

from urllib.parse import urlencode

from experiments.published import seed000, seed001, seed002


def studies(*seeds) -> str:
    """``&f=source:<study>…``: a published preset is pinned to the studies it is about, so
    own runs (and other studies) never join its series (issue 12, item 3)."""
    return "&" + urlencode([("f", f"source:{seed.SOURCE}") for seed in seeds])


# Arm (000), POWER (001) and x86 (002) studies.
_ARCHS = studies(seed000, seed001, seed002)

# By threads: IOzone N-N, the one test all three studies ran (seed 000: 40 targets, 6 clients,
# "45.2 GB/s for write", its thread count not stated; seed 001 Table 3: 4 to 64 processes;
# seed 002 Figure 9: 1 to 1024 threads, of which the text states 1 and the peaks, 256 for
# write and 1024 for read). Seed 000's IOR N-1 runs (one target, or a shared file) and its
# fio drive test are other tests: they are in "peak write by tool". The chart leaves seed
# 002's two points unjoined (its figure's other points are not stated) and says that seed
# 000's peak, at no stated thread count, is off it; the sentences say that no two studies
# share a thread count.
PRESETS = [
    (
        "Arm vs x86 vs POWER: IOzone write by threads",
        "metric=write_bw&x=param:threads&series=arch&baseline=x86_64&tool=iozone" + _ARCHS,
    ),
    (
        "Arm vs x86 vs POWER: IOzone read by threads",
        "metric=read_bw&x=param:threads&series=arch&baseline=x86_64&tool=iozone" + _ARCHS,
    ),
    (
        "Arm vs x86 vs POWER: peak write by tool",
        "metric=write_bw&x=tool&series=arch&stat=peak&chart=bar" + _ARCHS,
    ),
    (
        "Arm vs x86: peak write per storage server",
        # Each study's IOzone N-N peak: seed 000 states its file size (10 GiB per process) and
        # its 40 targets, seed 002 its 8 TB aggregate; neither changes what a peak is, so the
        # preset ignores them and its sentence says so.
        "metric=write_bw&x=tool&series=arch&f=arch:aarch64&f=arch:x86_64&norm=server"
        "&chart=bar&baseline=x86_64&stat=peak&ignore=param:file_size"
        "&ignore=param:aggregate_size&ignore=param:storage_targets" + studies(seed000, seed002),
    ),
    (
        "RAID0 vs RAID10: dd write per device",
        "metric=write_bw&x=tool&series=raid&tool=dd&baseline=10" + studies(seed002),
    ),
    (
        "RAID0 vs RAID10: StorageBench per device",
        "metric=write_bw&x=tool&series=raid&tool=storagebench&baseline=10" + studies(seed002),
    ),
    (
        "Metadata: file creates by processes",
        "metric=file_create&x=param:threads&series=arch" + studies(seed001),
    ),
]
# The dashboard's "Start here" links (titles as on the compare page).
DASHBOARD_PRESETS = [PRESETS[0], PRESETS[4]]
