"""Seed 002: Dell EMC Ready Solutions for HPC BeeGFS Storage (R740xd, 24x NVMe), as data."""

from __future__ import annotations

KEY = "002"
SOURCE = (
    "002 Dell EMC: Dell EMC Ready Solutions for HPC BeeGFS Storage (Nirmala Sundararajan, Nov 2019)"
)

KIB = 2**10
MIB = 2**20
GIB = 2**30
GB = 1e9

# "Each link can provide a theoretical peak performance of 12.4 GB/s" (of its EDR links).
_EDR_SOURCE = "002 Dell EMC 2019, Figure 9 text (InfiniBand EDR links)"

PROFILES = [
    {
        "key": "r640",
        "name": "Dell EMC PowerEdge R640 (management server)",
        "vendor": "Dell EMC",
        "model": "PowerEdge R640",
        "architecture": "x86_64",
        "cpu_model": "Intel Xeon Gold 5218",
        "sockets": 2,
        "cores_per_socket": 16,
        "clock_ghz": 2.3,
        "memory_gib": 96,
        "dimm_type": "12x 8GB DDR4 2666MT/s",
        "raid_controller": "PERC H740P Integrated RAID Controller",
        "notes": (
            "iDRAC9 Enterprise, dual 1100 W PSUs, BIOS 2.2.11. The 6 HDDs form a RAID 10 for "
            "the OS and InfluxDB. Connected only via Ethernet to the metadata and storage "
            "servers; the Ethernet rate is not stated, so no NIC is recorded."
        ),
        "source_ref": "Table 1; Management Service",
        "drives": [
            {
                "key": "os",
                "kind": "hdd",
                "model": "300GB 15K RPM SAS 2.5in HDD",
                "count": 6,
                "capacity_gb": 300,
                "interface": "sas",
                "purpose": "os",
                "source_ref": "Table 1; Management Service",
            },
        ],
        "nics": [],
    },
    {
        "key": "r740xd",
        "name": "Dell EMC PowerEdge R740xd (24x NVMe P4600)",
        "vendor": "Dell EMC",
        "model": "PowerEdge R740xd",
        "architecture": "x86_64",
        "cpu_model": "Intel Xeon Platinum 8268",
        "sockets": 2,
        "cores_per_socket": 24,
        "clock_ghz": 2.9,
        "numa_domains": 2,
        "memory_gib": 384,
        "dimm_type": "12x 32GB DDR4 2933MT/s",
        "notes": (
            "12 NVMe drives per CPU behind a PCIe switch fed by a x16 NVMe bridge card; each "
            "CPU also has one of the two ConnectX-5 EDR adapters (slots 1 and 8). Drive "
            "bandwidth is the Intel P4600 1.6 TB specification quoted in the text (3.2 GB/s "
            "read, 1.3 GB/s write); drives are x4, the PCIe generation is not stated. BOSS card "
            "with 2x 240GB M.2 SATA SSDs in RAID 1 for the OS. iDRAC9 Enterprise, dual "
            "2000 W PSUs, BIOS 2.2.11, CPLD 1.1.3, NVMe firmware QDV1DP13. Also on a private "
            "Ethernet network (rate not stated)."
        ),
        "source_ref": "Table 2; Table 3; R740xd, 24x NVMe Drives, Details on CPU Mapping",
        "drives": [
            {
                "key": "nvme",
                "kind": "nvme",
                "model": "Dell Express Flash NVMe P4600 1.6TB 2.5in U.2",
                "count": 24,
                "capacity_gb": 1600,
                "interface": "pcie",
                "pcie_lanes": 4,
                "seq_read_mbps": 3200,
                "seq_write_mbps": 1300,
                "purpose": "data",
                "source_ref": "Table 2; Figure 7 text (x4); Figure 9 text (3.2/1.3 GB/s)",
            },
            {
                "key": "os",
                "kind": "ssd",
                "model": "240GB M.2 SATA SSD (BOSS, RAID 1)",
                "count": 2,
                "capacity_gb": 240,
                "interface": "sata",
                "purpose": "os",
                "source_ref": "Table 2 (BOSS Card)",
            },
        ],
        "nics": [
            {
                "kind": "infiniband",
                "model": "Mellanox ConnectX-5 EDR",
                "rate_gbps": 100,
                "ports": 1,
                "count": 2,
                "usable_gbytes": 12.4,
                "usable_source": _EDR_SOURCE,
                "source_ref": "Table 2; Solution Reference Architecture; Figure 9 text",
            },
        ],
    },
    {
        "key": "c6420",
        "name": "Dell EMC PowerEdge C6420 (client)",
        "vendor": "Dell EMC",
        "model": "PowerEdge C6420",
        "architecture": "x86_64",
        "cpu_model": "Intel Xeon Gold 6148",
        "sockets": 2,
        "cores_per_socket": 20,
        "clock_ghz": 2.4,
        "memory_gib": 192,
        "dimm_type": "12x 16GB DDR4 2666 MT/s",
        "notes": "BIOS 2.2.9; OFED 4.5-1.0.1.0. One InfiniBand link per client.",
        "source_ref": "Table 4",
        "drives": [
            {
                "key": "os",
                "kind": "ssd",
                "model": "120GB M.2 boot drive (BOSS, RAID 1)",
                "count": 2,
                "capacity_gb": 120,
                "purpose": "os",
                "source_ref": "Table 4 (BOSS Card)",
            },
        ],
        "nics": [
            {
                "kind": "infiniband",
                "model": "Mellanox ConnectX-4 EDR",
                "rate_gbps": 100,
                "ports": 1,
                "count": 1,
                "usable_gbytes": 12.4,
                "usable_source": _EDR_SOURCE,
                "source_ref": "Table 4 (Interconnect); Figure 9 text",
            },
        ],
    },
]

_SERVER_OS = {"os": "CentOS 7.6", "kernel": "3.10.0-957.el7.x86_64"}
# The document names no hosts (apart from the BeeGFS node "node001-numa0-4"); hostnames are ours.
NODES = [
    {
        "key": "mgmt",
        "hostname": "r640-mgmt",
        "profile": "r640",
        "os": "CentOS 7.6",
        "kernel": "3.10.0-957.27.2.el7.x86_64",
        "notes": "Management and monitoring server (hostname assigned by beeweb).",
        "source_ref": "Table 1; Management Service",
    },
    {
        "key": "meta",
        "hostname": "r740xd-meta",
        "profile": "r740xd",
        **_SERVER_OS,
        "notes": (
            "Metadata server that also hosts 3 storage targets on NUMA zone 1 (hostname "
            "assigned by beeweb)."
        ),
        "source_ref": "Table 2; Table 3; Metadata Service",
    },
    *[
        {
            "key": f"storage{n}",
            "hostname": f"r740xd-storage{n}",
            "profile": "r740xd",
            **_SERVER_OS,
            "notes": f"Dedicated storage server {n} of 5 (hostname assigned by beeweb).",
            "source_ref": "Table 2; Table 3; Storage Service (Figure 5)",
        }
        for n in range(1, 6)
    ],
    *[
        {
            "key": f"client{n:02d}",
            "hostname": f"c6420-client{n:02d}",
            "profile": "c6420",
            "os": "Red Hat Enterprise Linux Server release 7.6",
            "kernel": "3.10.0-957.el7.x86_64",
            "notes": f"Client {n} of 32 (hostname assigned by beeweb).",
            "source_ref": "Table 4",
        }
        for n in range(1, 33)
    ],
    {
        "key": "raid-trial",
        "hostname": "r740xd-raid-trial",
        "profile": "r740xd",
        **_SERVER_OS,
        "notes": (
            "The R740xd on which RAID 0 and RAID 10 devices were compared with dd and "
            "StorageBench; the document does not say which server (hostname assigned by "
            "beeweb)."
        ),
        "source_ref": "Storage Service (RAID 0 vs RAID 10, items 1-2)",
    },
]

_ST = {
    "kind": "storage",
    "raid_level": "0",
    "disks": 4,
    "drive": ("r740xd", "nvme"),
    "filesystem": "xfs",
    "pool": 1,
}

TESTBEDS = [
    {
        "key": "ready-solution",
        "name": "Dell EMC Ready Solution BeeGFS, R740xd 24x NVMe (2019)",
        "description": (
            "One R640 management/monitoring server, one R740xd metadata server that also "
            "holds 3 storage targets, 5 dedicated R740xd storage servers and 32 C6420 clients. "
            "6 MDTs (RAID 1 of 2 drives, ext4) and 33 STs (RAID 0 of 4 drives, XFS). Raw "
            "capacity of the five storage servers 211 TB, usable 190 TiB. Services are pinned "
            "to NUMA zones with custom systemd units and multihoming. Grafana 6.3.2, InfluxDB "
            "1.7.7, Mellanox OFED 4.5-1.0.1.0."
        ),
        "beegfs_version": "7.1.3",
        "fabric": "infiniband",
        "network_notes": (
            "Each metadata/storage server has two InfiniBand EDR links, one per NUMA zone "
            "(ib0 for NUMA 0, ib1 for NUMA 1); clients have one. The document counts 11 EDR "
            "links for the storage servers (12.4 GB/s each, 136.4 GB/s): 2 per dedicated "
            "storage server and 1 for the metadata server, whose ib1 carries its NUMA-1 "
            "storage targets. The management server is connected via Ethernet only."
        ),
        "source_ref": "Solution Reference Architecture; Tables 1-4; Figure 9 text",
        "pools": [{"pool_id": 1, "name": "Default", "source_ref": "beegfs-ctl --getentryinfo"}],
        "members": [
            {"node": "mgmt", "management": True, "monitoring": True},
            {"node": "meta", "metadata": True, "storage": True, "storage_links": 1},
            *[{"node": f"storage{n}", "storage": True, "storage_links": 2} for n in range(1, 6)],
            *[{"node": f"client{n:02d}", "client": True} for n in range(1, 33)],
        ],
        "targets": [
            {
                "key": "meta-mdt",
                "name": "r740xd-meta MDTs (RAID 1, NUMA 0)",
                "kind": "metadata",
                "node": "meta",
                "numa_domain": 0,
                "raid_level": "1",
                "disks": 2,
                "drive": ("r740xd", "nvme"),
                "filesystem": "ext4",
                "count": 6,
                "source_ref": "Metadata Service (Figures 3-4 text)",
            },
            {
                **_ST,
                "key": "meta-st",
                "name": "r740xd-meta STs (RAID 0, NUMA 1)",
                "node": "meta",
                "numa_domain": 1,
                "count": 3,
                "source_ref": "Metadata Service (Figures 3-4 text)",
            },
            *[
                {
                    **_ST,
                    "key": f"storage{n}-st-numa{numa}",
                    "name": f"r740xd-storage{n} STs (RAID 0, NUMA {numa})",
                    "node": f"storage{n}",
                    "numa_domain": numa,
                    "count": 3,
                    "source_ref": "Storage Service (Figure 6 text)",
                }
                for n in range(1, 6)
                for numa in (0, 1)
            ],
        ],
    },
    {
        "key": "raid-trial",
        "name": "Dell R740xd RAID0 vs RAID10 device trial",
        "description": (
            "Write throughput of one RAID 0 device (4 P4600 drives) and one RAID 10 device "
            "measured with dd and StorageBench to choose the storage target layout; RAID 0 "
            "was chosen. The RAID 10 drive count and the local file system are not stated."
        ),
        "beegfs_version": "7.1.3",
        "source_ref": "Storage Service (RAID 0 vs RAID 10, items 1-3); Table 3",
        "members": [{"node": "raid-trial", "storage": True}],
        "targets": [
            {
                "key": "raid0",
                "name": "RAID 0 device (4x P4600)",
                "kind": "storage",
                "node": "raid-trial",
                "raid_level": "0",
                "disks": 4,
                "drive": ("r740xd", "nvme"),
                "source_ref": "Storage Service (items 1-2)",
            },
            {
                "key": "raid10",
                "name": "RAID 10 device (P4600)",
                "kind": "storage",
                "node": "raid-trial",
                "raid_level": "10",
                "drive": ("r740xd", "nvme"),
                "source_ref": "Storage Service (items 1-3)",
            },
        ],
    },
]

TUNING_SETS = [
    {
        "key": "solution",
        "name": "Dell EMC Ready Solution BeeGFS tuning (2019)",
        "description": (
            "OS settings on the metadata and storage servers, BeeGFS service options and the "
            "stripe pattern of the benchmark directory (2 MB chunks over 3 targets, three "
            "targets per NUMA zone). Automatic NUMA balancing is off because services are "
            "pinned to NUMA zones by hand."
        ),
        "source_ref": "Sequential Writes and Reads N-N; R740xd CPU Mapping",
        "params": [
            ("os", "transparent_hugepage", "never", "Sequential Writes and Reads N-N"),
            ("os", "vm.dirty_background_ratio", "5", "Sequential Writes and Reads N-N"),
            ("os", "vm.dirty_ratio", "20", "Sequential Writes and Reads N-N"),
            ("os", "vm.min_free_kbytes", "262144", "Sequential Writes and Reads N-N"),
            ("os", "vm.vfs_cache_pressure", "50", "Sequential Writes and Reads N-N"),
            ("os", "vm.zone_reclaim_mode", "2", "Sequential Writes and Reads N-N"),
            (
                "os",
                "kernel.numa_balancing",
                "0",
                "Sequential Writes and Reads N-N; R740xd, 24x NVMe Drives, Details on CPU Mapping",
            ),
            ("meta", "tuneTargetChooser", "roundrobin", "Sequential Writes and Reads N-N"),
            ("meta", "tuneNumWorkers", "24", "Sequential Writes and Reads N-N"),
            ("storage", "tuneNumWorkers", "32", "Sequential Writes and Reads N-N"),
            ("meta", "connMaxInternodeNum", "32", "Sequential Writes and Reads N-N"),
            ("storage", "connMaxInternodeNum", "12", "Sequential Writes and Reads N-N"),
            ("client", "connMaxInternodeNum", "24", "Sequential Writes and Reads N-N"),
            (
                "striping",
                "chunksize",
                "2m",
                "Sequential Writes and Reads N-N (beegfs-ctl --getentryinfo)",
            ),
            (
                "striping",
                "numtargets",
                "3",
                "Sequential Writes and Reads N-N (beegfs-ctl --getentryinfo)",
            ),
            ("striping", "pattern", "raid0", "beegfs-ctl --getentryinfo (Type: RAID0)"),
            ("striping", "storagepoolid", "1", "beegfs-ctl --getentryinfo (Storage Pool: 1)"),
            ("localfs", "filesystem", "xfs", "Metadata Service (STs based on XFS)"),
            ("localfs", "mdt.filesystem", "ext4", "Metadata Service (each MDT is ext4)"),
        ],
    },
]

_SEQ_CMD = "iozone -i 0 -i 1 -c -e -w -r 1m -I -s $Size -t $Thread -+n -+m /path/to/threadlist"
_RAND_CMD = "iozone -i 2 -w -c -O -I -r 4K -s $Size -t $Thread -+n -+m /path/to/threadlist"
_SEQ_PARAMS = {
    "record_size": 1 * MIB,
    # "An aggregate file size of 8TB", equally divided among the threads.
    "aggregate_size": 8e12,
    "file_per_process": True,
    "direct": True,
}
_RAND_PARAMS = {**_SEQ_PARAMS, "record_size": 4 * KIB, "pattern": "rand"}
_DROP = "OS caches dropped between iterations and between the write and read tests."


def _metric(
    name: str, value: float, unit: str, ref: str, stat: str = "value", approx: bool = False
) -> dict:
    metric = {"name": name, "value": value, "unit": unit, "stat": stat, "source_ref": ref}
    if approx:
        metric["extra"] = {"approx": True}
    return metric


RUNS = [
    {
        "key": "iozone-seq-1",
        "testbed": "ready-solution",
        "tuning_set": "solution",
        "tool": "iozone",
        "tool_version": "3.487",
        "label": "IOzone N-N sequential write/read, 1 thread",
        "command": _SEQ_CMD,
        "params": {**_SEQ_PARAMS, "threads": 1, "nodes": 1, "ops": ["write", "read"]},
        "notes": "Single-thread throughput is stated as ~3 GB/s for both write and read. " + _DROP,
        "source_ref": "Sequential Writes and Reads N-N (Figure 9 text)",
        "metrics": [
            _metric("write_bw", 3 * GB, "B/s", "Figure 9 text", approx=True),
            _metric("read_bw", 3 * GB, "B/s", "Figure 9 text", approx=True),
        ],
    },
    {
        "key": "iozone-seq-256",
        "testbed": "ready-solution",
        "tuning_set": "solution",
        "tool": "iozone",
        "tool_version": "3.487",
        "label": "IOzone N-N sequential write peak, 256 threads",
        "command": _SEQ_CMD,
        # Threads go round robin over the 32 clients.
        "params": {**_SEQ_PARAMS, "threads": 256, "nodes": 32, "ops": ["write", "read"]},
        "notes": (
            "Peak write (89% of the 136.4 GB/s network limit); the read value at 256 threads "
            "is only in Figure 9. The conclusion rounds it to ~121 GB/s. " + _DROP
        ),
        "source_ref": "Sequential Writes and Reads N-N (Figure 9 text)",
        "metrics": [_metric("write_bw", 121 * GB, "B/s", "Figure 9 text")],
    },
    {
        "key": "iozone-seq-1024",
        "testbed": "ready-solution",
        "tuning_set": "solution",
        "tool": "iozone",
        "tool_version": "3.487",
        "label": "IOzone N-N sequential read peak, 1024 threads",
        "command": _SEQ_CMD,
        "params": {**_SEQ_PARAMS, "threads": 1024, "nodes": 32, "ops": ["write", "read"]},
        "notes": (
            "Peak read (97% of the 136.4 GB/s network limit); the write value at 1024 threads "
            "is only in Figure 9. The conclusion rounds it to ~132 GB/s. " + _DROP
        ),
        "source_ref": "Sequential Writes and Reads N-N (Figure 9 text)",
        "metrics": [_metric("read_bw", 132 * GB, "B/s", "Figure 9 text")],
    },
    {
        "key": "iozone-rand-write-512",
        "testbed": "ready-solution",
        "tuning_set": "solution",
        "tool": "iozone",
        "tool_version": "3.487",
        "label": "IOzone N-N random write IOPS peak, 512 threads",
        "command": _RAND_CMD,
        "params": {**_RAND_PARAMS, "threads": 512, "nodes": 32, "ops": ["randwrite"]},
        "notes": (
            "Peak random write: ~3.6 million IOPS with 4 KiB requests (-r 4K), stored as "
            "randwrite_bw = 3.6e6 x 4,096 B/s = 14.7 GB/s, as the IOzone parser converts -O "
            "(ops/s) output. OS caches dropped between runs."
        ),
        "source_ref": "Random Writes and Reads N-N (Figure 10 text); Conclusion",
        "metrics": [
            {
                **_metric(
                    "randwrite_bw",
                    3.6e6 * 4 * KIB,
                    "B/s",
                    "Figure 10 text (~3.6 million IOPS, 4 KiB)",
                ),
                "extra": {"approx": True, "iops": 3.6e6, "io_size": 4 * KIB},
            },
        ],
    },
    {
        "key": "iozone-rand-read-1024",
        "testbed": "ready-solution",
        "tuning_set": "solution",
        "tool": "iozone",
        "tool_version": "3.487",
        "label": "IOzone N-N random read IOPS peak, 1024 threads",
        "command": _RAND_CMD,
        "params": {**_RAND_PARAMS, "threads": 1024, "nodes": 32, "ops": ["randread"]},
        "notes": (
            "Peak random read: ~3.5 million IOPS with 4 KiB requests (-r 4K), stored as "
            "randread_bw = 3.5e6 x 4,096 B/s = 14.3 GB/s, as the IOzone parser converts -O "
            "(ops/s) output. OS caches dropped between runs."
        ),
        "source_ref": "Random Writes and Reads N-N (Figure 10 text); Conclusion",
        "metrics": [
            {
                **_metric(
                    "randread_bw",
                    3.5e6 * 4 * KIB,
                    "B/s",
                    "Figure 10 text (~3.5 million IOPS, 4 KiB)",
                ),
                "extra": {"approx": True, "iops": 3.5e6, "io_size": 4 * KIB},
            },
        ],
    },
    {
        "key": "dd-raid0",
        "testbed": "raid-trial",
        "tuning_set": "solution",
        "target": "raid0",
        "tool": "dd",
        "label": "dd write, 10 GiB file, 1 MiB blocks, direct I/O, RAID 0 device",
        "params": {
            "transfer_size": 1 * MIB,
            "block_size": 10 * GIB,
            "file_size": 10 * GIB,
            "direct": True,
        },
        "notes": (
            'Average write throughput to each RAID 0 device ("about 5.1 GB/s"). The tuning '
            "set is the solution's; the document states none specific to this trial."
        ),
        "source_ref": "Storage Service (RAID 0 vs RAID 10, item 1)",
        "metrics": [
            _metric(
                "write_bw", 5.1 * GB, "B/s", "Storage Service, item 1", stat="mean", approx=True
            ),
        ],
    },
    {
        "key": "dd-raid10",
        "testbed": "raid-trial",
        "tuning_set": "solution",
        "target": "raid10",
        "tool": "dd",
        "label": "dd write, 10 GiB file, 1 MiB blocks, direct I/O, RAID 10 device",
        "params": {
            "transfer_size": 1 * MIB,
            "block_size": 10 * GIB,
            "file_size": 10 * GIB,
            "direct": True,
        },
        "notes": (
            "Average write throughput to each RAID 10 device. The tuning set is the "
            "solution's; the document states none specific to this trial."
        ),
        "source_ref": "Storage Service (RAID 0 vs RAID 10, item 1)",
        "metrics": [_metric("write_bw", 3.4 * GB, "B/s", "Storage Service, item 1", stat="mean")],
    },
    {
        "key": "storagebench-raid0",
        "testbed": "raid-trial",
        "tuning_set": "solution",
        "target": "raid0",
        "tool": "storagebench",
        "tool_version": "7.1.3",
        "label": "StorageBench maximum throughput, RAID 0 device",
        "notes": (
            "Maximum throughput. Stored as write_bw (StorageBench reports write or read): the "
            'document sets it beside the dd write results ("like what was obtained using dd '
            'commands") and item 3 speaks of write performance. 5.5 GB/s is 106% of the '
            "4 x 1.3 GB/s = 5.2 GB/s datasheet write limit of the array; beeweb flags it. "
            "tool_version is the BeeGFS release."
        ),
        "source_ref": "Storage Service (RAID 0 vs RAID 10, item 2)",
        "params": {"targets": 1},
        "metrics": [_metric("write_bw", 5.5 * GB, "B/s", "Storage Service, item 2", stat="max")],
    },
    {
        "key": "storagebench-raid10",
        "testbed": "raid-trial",
        "tuning_set": "solution",
        "target": "raid10",
        "tool": "storagebench",
        "tool_version": "7.1.3",
        "label": "StorageBench maximum throughput, RAID 10 device",
        "notes": (
            "Maximum throughput. Stored as write_bw (StorageBench reports write or read): the "
            "document sets it beside the dd write results and item 3 speaks of write "
            "performance. tool_version is the BeeGFS release."
        ),
        "source_ref": "Storage Service (RAID 0 vs RAID 10, item 2)",
        "params": {"targets": 1},
        "metrics": [_metric("write_bw", 3.4 * GB, "B/s", "Storage Service, item 2", stat="max")],
    },
]
