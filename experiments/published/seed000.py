"""Seed 000: Huawei/ThinkParQ white paper on BeeGFS on Arm (Kunpeng 920, TaiShan 200), as data."""

from __future__ import annotations

KEY = "000"
SOURCE = (
    "000 Huawei/ThinkParQ: Performance Evaluation of the BeeGFS File System on the Arm "
    "AArch64 Architecture (white paper, May 2022)"
)

KIB = 2**10
MIB = 2**20
GIB = 2**30
GB = 1e9  # the paper gives throughput in decimal units (footnote 2)
MB = 1e6

_CPU = {
    "vendor": "Huawei",
    "model": "TaiShan 200 (model 2280)",
    "architecture": "aarch64",
    "cpu_model": "HiSilicon Kunpeng 920-5250",
    "sockets": 2,
    "cores_per_socket": 48,
    "clock_ghz": 2.6,
    "numa_domains": 4,
    "memory_gib": 256,
    "memory_channels": 16,
    "dimm_type": "16 GB DDR4-2666 RDIMM (one per channel)",
    "tdp_watts": 150,
}
_NIC = {
    "kind": "infiniband",
    "model": "Mellanox MT27800 Family ConnectX-5 (FDR/EDR IB, PCIe 3.0 x16)",
    "rate_gbps": 100,
    "ports": 1,
    "count": 1,
    "source_ref": "Hardware Configuration (Network); Notes",
}
_SYSTEM_SSD = {
    "key": "os",
    "kind": "ssd",
    "model": "Huawei ES3000 V5 800 GB SAS SSD",
    "count": 1,
    "capacity_gb": 800,
    "interface": "sas",
    "purpose": "os",
    "source_ref": "Hardware Configuration (Storage)",
}

PROFILES = [
    {
        "key": "taishan-storage",
        "name": "Huawei TaiShan 200-2280 storage node (Kunpeng 920, 10x NVMe)",
        **_CPU,
        "notes": (
            "48 MB LLC, Armv8.2-A, 150 W TDP per CPU; each CPU is two NUMA domains of 24 "
            "cores (chiplet design). The CPU supports PCIe 4.0, but the 12-NVMe chassis runs "
            "PCIe 3 to the backplane, so the NVMe drives (PCIe 4.0 x4 capable) work at PCIe 3 "
            "x4. 6 NVMe drives hang off CPU 1, 4 NVMe drives and the IB NIC off CPU 2. Drive "
            "bandwidth and IOPS are the paper's fio measurements of one drive (Basic network "
            "and NVMe drive characteristics), not datasheet values. CPLD 5.14, BIOS 1.38."
        ),
        "source_ref": "Hardware Configuration; Notes",
        "drives": [
            {
                "key": "nvme",
                "kind": "nvme",
                "model": "Huawei ES3600P V6 3.2 TB NVMe SSD",
                "count": 10,
                "capacity_gb": 3200,
                "interface": "pcie",
                "pcie_gen": 3,
                "pcie_lanes": 4,
                "seq_read_mbps": 3573,
                "seq_write_mbps": 3060,
                "rand_read_iops": 825000,
                "rand_write_iops": 300000,
                "purpose": "data",
                "source_ref": "Hardware Configuration (Storage); Notes; NVMe drive performance "
                "with fio",
            },
            _SYSTEM_SSD,
        ],
        "nics": [_NIC],
    },
    {
        "key": "taishan-client",
        "name": "Huawei TaiShan 200-2280 client node (Kunpeng 920)",
        **_CPU,
        "notes": (
            "48 MB LLC, Armv8.2-A, 150 W TDP per CPU; each CPU is two NUMA domains of 24 "
            "cores (chiplet design). CPLD 5.14, BIOS 1.38."
        ),
        "source_ref": "Hardware Configuration",
        "drives": [_SYSTEM_SSD],
        "nics": [_NIC],
    },
]

# The paper numbers the machines "servers 1 to 10"; hostnames are ours.
NODES = [
    {
        "key": f"server{n}",
        "hostname": f"kunpeng-server{n}",
        "profile": "taishan-storage" if n <= 4 else "taishan-client",
        "os": "CentOS 8.4",
        "kernel": "4.18.0-305.17.1" if n <= 4 else "5.4.173",
        "notes": (
            f"Server {n} of 10 (hostname assigned by beeweb). Arm PAN disabled."
            + (
                ""
                if n <= 4
                else " Kernel upgraded from 4.18 to 5.4 for queued spinlocks on AArch64."
            )
        ),
        "source_ref": "Topology; Software Configuration",
    }
    for n in range(1, 11)
]

# Per storage server: one storage service per NVMe drive and 10 metadata services on
# partitions of the same drives (27:1 capacity ratio), mapped to NUMA domains. The paper's
# mapping table counts NUMA 1-4; numa_domain here is 0-based as in its text ("NUMA 2 and 3"
# are CPU 2).
_NUMA_LAYOUT = [
    ("storage", 0, "stor0-stor2", 3),
    ("storage", 1, "stor3-stor5", 3),
    ("storage", 2, "stor6-stor7", 2),
    ("storage", 3, "stor8-stor9", 2),
    ("metadata", 2, "meta0-meta2, meta6-meta7", 5),
    ("metadata", 3, "meta3-meta5, meta8-meta9", 5),
]

TESTBEDS = [
    {
        "key": "kunpeng",
        "name": "Huawei TaiShan 200 Kunpeng 920, 4 servers + 6 clients (2022)",
        "description": (
            "Servers 1-4 run metadata and storage (server 1 also management), servers 5-10 "
            "are clients (BeeGFS Configuration). Each of the 40 NVMe drives is partitioned "
            "into one storage and one metadata target at a 27:1 capacity ratio: 40 storage "
            "targets served by 40 storage services and 40 metadata targets served by 40 "
            "metadata services. Storage uses XFS, metadata ext4. The client module is patched "
            "with the Arm PAN enhancement released with BeeGFS 7.3.0. OpenMPI 4.1.1."
        ),
        "beegfs_version": "7.2.4",
        "fabric": "infiniband",
        "switch": "Mellanox MSB7700 EDR 36-port non-blocking",
        "network_notes": (
            "One 100 Gb/s InfiniBand connection per node; qperf measures 12.0 GB/s per "
            "client-server pair, i.e. 48.0 GB/s to the 4 storage servers. Node management "
            "runs on a separate Ethernet network."
        ),
        "source_ref": "Topology; Software Configuration; BeeGFS Configuration",
        "members": [
            *[
                {"node": f"server{n}", "management": n == 1, "metadata": True, "storage": True}
                for n in range(1, 5)
            ],
            *[{"node": f"server{n}", "client": True} for n in range(5, 11)],
        ],
        "targets": [
            {
                "key": f"server{n}-{kind}-numa{numa}",
                "name": f"server{n} {services} (NUMA {numa})",
                "kind": kind,
                "node": f"server{n}",
                "numa_domain": numa,
                "raid_level": "none",
                "disks": 1,
                "drive": ("taishan-storage", "nvme"),
                "filesystem": "xfs" if kind == "storage" else "ext4",
                "count": count,
                "source_ref": "BeeGFS Configuration (Storage services; Metadata services)",
            }
            for n in range(1, 5)
            for kind, numa, services, count in _NUMA_LAYOUT
        ],
    },
]

TUNING_SETS = [
    {
        "key": "base",
        "name": "Kunpeng 920 BeeGFS tuning (Huawei/ThinkParQ 2022)",
        "description": (
            "BeeGFS parameters of the evaluation; the stripe chunk size applies to the IOR, "
            "IOzone and MDtest runs. rq_affinity is set on /sys/block/sda. The number of "
            "targets per file is not stated."
        ),
        "source_ref": "BeeGFS parameters; Software Configuration",
        "params": [
            ("meta", "connMaxInternodeNum", "128", "BeeGFS parameters"),
            ("storage", "connMaxInternodeNum", "96", "BeeGFS parameters"),
            ("client", "connMaxInternodeNum", "96", "BeeGFS parameters"),
            ("striping", "chunksize", "1m", "BeeGFS parameters"),
            ("meta", "tuneNumWorkers", "12", "BeeGFS parameters"),
            ("storage", "tuneNumWorkers", "12", "BeeGFS parameters"),
            ("meta", "tuneTargetChooser", "roundrobin", "BeeGFS parameters"),
            ("localfs", "filesystem", "xfs", "Software Configuration (File system)"),
            ("localfs", "mdt.filesystem", "ext4", "Software Configuration (File system)"),
            ("os", "arm_pan", "disabled", "Software Configuration (Operating system)"),
            ("os", "rq_affinity.sda", "1", "Software Configuration (Operating system)"),
        ],
    },
]

_AVG3 = "All results are averaged over three runs (Performance Evaluation)."
_IOR_CMD = "ior -w -r -i 3 --posix.odirect -t 8m -b 16g -g -d 3 -e -E -o $outfile -s 1"
_IOR_PARAMS = {
    "transfer_size": 8 * MIB,
    "block_size": 16 * GIB,
    "segments": 1,
    "iterations": 3,
    "direct": True,
    "file_per_process": False,
    "api": "POSIX",
}
_IOR_NOTE = (
    " The text calls 8 MiB the block size and 16 GiB the transfer size; the command line "
    "(-t 8m -b 16g) is recorded here."
)
_IOZONE_PARAMS = {"file_size": 10 * GIB, "direct": True, "file_per_process": True}


def _mean(name: str, value: float, unit: str, ref: str, approx: bool = False) -> dict:
    metric = {"name": name, "value": value, "unit": unit, "stat": "mean", "source_ref": ref}
    if approx:
        metric["extra"] = {"approx": True}
    return metric


RUNS = [
    {
        "key": "qperf",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "qperf",
        "tool_version": "0.4.11",
        "label": "qperf one-way streaming bandwidth, one client to one server",
        "params": {"nodes": 1},
        "notes": (
            "The paper does not name the qperf test; a 100 Gb/s InfiniBand stream is recorded "
            "as rc_bw. " + _AVG3
        ),
        "source_ref": "Basic network and NVMe drive characteristics (Network performance)",
        "metrics": [
            _mean(
                "rc_bw",
                12.0 * GB,
                "B/s",
                "Basic network and NVMe drive characteristics; Executive Summary",
            ),
        ],
    },
    {
        "key": "fio-nvme-seq",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "fio",
        "tool_version": "3.19",
        "label": "fio sequential write/read, one NVMe drive (PCIe 3 x4)",
        "params": {"pattern": "seq", "drives": 1},
        "notes": (
            "Raw NVMe drive, not a BeeGFS target. StorageBench on one drive reached the same "
            "level (no number given). " + _AVG3
        ),
        "source_ref": "Basic network and NVMe drive characteristics (NVMe drive performance)",
        "metrics": [
            _mean("write_bw", 3060 * MB, "B/s", "NVMe drive performance with fio"),
            _mean("read_bw", 3573 * MB, "B/s", "NVMe drive performance with fio"),
        ],
    },
    {
        "key": "fio-nvme-rand",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "fio",
        "tool_version": "3.19",
        "label": "fio random write/read IOPS, one NVMe drive (PCIe 3 x4)",
        "params": {"pattern": "rand", "drives": 1},
        "notes": "Raw NVMe drive, not a BeeGFS target; block size not stated. " + _AVG3,
        "source_ref": "Basic network and NVMe drive characteristics (NVMe drive performance)",
        "metrics": [
            _mean("write_iops", 300000, "op/s", "NVMe drive performance with fio"),
            _mean("read_iops", 825000, "op/s", "NVMe drive performance with fio"),
        ],
    },
    {
        "key": "iozone-seq-peak-write",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "iozone",
        "tool_version": "3.493",
        "label": "IOzone N-N sequential write peak, 40 targets",
        "command": "iozone -i $test -w -c -O -I -r 1m -s 10g",
        "params": {
            **_IOZONE_PARAMS,
            "record_size": 1 * MIB,
            "nodes": 6,
            "storage_targets": 40,
            "ops": ["write"],
        },
        "notes": (
            "Peak over the task counts of the figure; the task count of the peak is only in "
            "the figure. 94.2% of the 48.0 GB/s network baseline. " + _AVG3
        ),
        "source_ref": "Executive Summary; IOzone N-N test, sequential read and write",
        "metrics": [_mean("write_bw", 45.2 * GB, "B/s", "Executive Summary")],
    },
    {
        "key": "iozone-seq-peak-read",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "iozone",
        "tool_version": "3.493",
        "label": "IOzone N-N sequential read peak, 40 targets",
        "command": "iozone -i $test -w -c -O -I -r 1m -s 10g",
        "params": {
            **_IOZONE_PARAMS,
            "record_size": 1 * MIB,
            "nodes": 6,
            "storage_targets": 40,
            "ops": ["read"],
        },
        "notes": (
            "Peak over the task counts of the figure; the task count of the peak is only in "
            "the figure. 97.9% of the 48.0 GB/s network baseline. " + _AVG3
        ),
        "source_ref": "Executive Summary; IOzone N-N test, sequential read and write",
        "metrics": [_mean("read_bw", 47.0 * GB, "B/s", "Executive Summary")],
    },
    {
        "key": "iozone-rand-write-576",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "iozone",
        "tool_version": "3.493",
        "label": "IOzone N-N random write IOPS, 576 tasks, one target",
        "command": "iozone -i $test -w -c -O -I -r 4k -s 10g",
        "params": {
            **_IOZONE_PARAMS,
            "record_size": 4 * KIB,
            "threads": 576,
            "nodes": 6,
            "storage_targets": 1,
            "pattern": "rand",
            "ops": ["randwrite"],
        },
        "notes": (
            "Peak of the random write curve: 4917 k-IOPS with 4 KiB records (-r 4k), stored as "
            "randwrite_bw = 4,917,000 x 4,096 B/s = 20.1 GB/s, as the IOzone parser converts "
            "-O (ops/s) output. The figure says one target; 20.1 GB/s is above one NVMe drive "
            "(3.06 GB/s by fio) and one server link (12.0 GB/s by qperf), so beeweb flags it. "
            + _AVG3
        ),
        "source_ref": "IOzone N-N test, random read and write performance",
        "metrics": [
            {
                **_mean(
                    "randwrite_bw",
                    4917 * 1000 * 4 * KIB,
                    "B/s",
                    "IOzone N-N test, random read and write performance (4917 k-IOPS, 4 KiB)",
                ),
                "extra": {"iops": 4917 * 1000, "io_size": 4 * KIB},
            },
        ],
    },
    {
        "key": "iozone-rand-read-768",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "iozone",
        "tool_version": "3.493",
        "label": "IOzone N-N random read IOPS, 768 tasks, one target",
        "command": "iozone -i $test -w -c -O -I -r 4k -s 10g",
        "params": {
            **_IOZONE_PARAMS,
            "record_size": 4 * KIB,
            "threads": 768,
            "nodes": 6,
            "storage_targets": 1,
            "pattern": "rand",
            "ops": ["randread"],
        },
        "notes": (
            "Peak of the random read curve: 3504 k-IOPS with 4 KiB records (-r 4k), stored as "
            "randread_bw = 3,504,000 x 4,096 B/s = 14.4 GB/s, as the IOzone parser converts "
            "-O (ops/s) output. The figure says one target; 14.4 GB/s is above one NVMe drive "
            "(3.57 GB/s by fio) and one server link (12.0 GB/s by qperf), so beeweb flags it. "
            + _AVG3
        ),
        "source_ref": "IOzone N-N test, random read and write performance",
        "metrics": [
            {
                **_mean(
                    "randread_bw",
                    3504 * 1000 * 4 * KIB,
                    "B/s",
                    "IOzone N-N test, random read and write performance (3504 k-IOPS, 4 KiB)",
                ),
                "extra": {"iops": 3504 * 1000, "io_size": 4 * KIB},
            },
        ],
    },
    {
        "key": "ior-1target-write-4",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "ior",
        "tool_version": "3.4.0",
        "label": "IOR N-1 sequential write, 4 tasks, one target",
        "command": _IOR_CMD,
        "params": {**_IOR_PARAMS, "threads": 4, "storage_targets": 1},
        "notes": (
            "4 tasks reach the write limit of one target (one NVMe drive); how the 4 tasks "
            "were placed on the 6 clients is not stated." + _IOR_NOTE + " " + _AVG3
        ),
        "source_ref": "IOR N-1 test, sequential accesses with one target",
        "metrics": [
            _mean(
                "write_bw",
                3.1 * GB,
                "B/s",
                "IOR N-1 test, sequential accesses with one target",
                approx=True,
            ),
        ],
    },
    {
        "key": "ior-1target-read-24",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "ior",
        "tool_version": "3.4.0",
        "label": "IOR N-1 sequential read, 24 tasks, one target",
        "command": _IOR_CMD,
        "params": {**_IOR_PARAMS, "threads": 24, "nodes": 6, "storage_targets": 1},
        "notes": "24 tasks reach the read limit of one target." + _IOR_NOTE + " " + _AVG3,
        "source_ref": "IOR N-1 test, sequential accesses with one target",
        "metrics": [
            _mean(
                "read_bw",
                3.6 * GB,
                "B/s",
                "IOR N-1 test, sequential accesses with one target",
                approx=True,
            ),
        ],
    },
    {
        "key": "ior-40targets-read-192",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "ior",
        "tool_version": "3.4.0",
        "label": "IOR N-1 sequential read, 192 tasks, 40 targets",
        "command": _IOR_CMD,
        "params": {**_IOR_PARAMS, "threads": 192, "nodes": 6, "storage_targets": 40},
        "notes": (
            "Read maximum; 100% of the network bandwidth to the 4 storage servers."
            + _IOR_NOTE
            + " "
            + _AVG3
        ),
        "source_ref": "IOR N-1 test, sequential accesses with 40 targets",
        "metrics": [
            _mean("read_bw", 48.1 * GB, "B/s", "IOR N-1 test, sequential accesses with 40 targets"),
        ],
    },
    {
        "key": "ior-40targets-write-48",
        "testbed": "kunpeng",
        "tuning_set": "base",
        "tool": "ior",
        "tool_version": "3.4.0",
        "label": "IOR N-1 sequential write, 48 tasks, 40 targets",
        "command": _IOR_CMD,
        "params": {**_IOR_PARAMS, "threads": 48, "nodes": 6, "storage_targets": 40},
        "notes": (
            "Write maximum; 34.5% of the network bandwidth (serialisation of many processes "
            "on one inode in the client)." + _IOR_NOTE + " " + _AVG3
        ),
        "source_ref": "IOR N-1 test, sequential accesses with 40 targets",
        "metrics": [
            _mean(
                "write_bw", 16.6 * GB, "B/s", "IOR N-1 test, sequential accesses with 40 targets"
            ),
        ],
    },
]
