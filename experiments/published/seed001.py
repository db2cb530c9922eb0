"""Seed 001: ThinkParQ, "BeeGFS Benchmarks on IBM OpenPOWER Servers" (Oct 2016), as plain data."""

from __future__ import annotations

KEY = "001"
SOURCE = "001 ThinkParQ: BeeGFS Benchmarks on IBM OpenPOWER Servers (Ely de Oliveira, Oct 2016)"

GIB = 2**30
MIB = 2**20

PROFILES = [
    {
        "key": "s812lc-ssd",
        "name": "IBM S812LC (10x 6 TB RAID0 + 960 GB SSD)",
        "vendor": "IBM",
        "model": "S812LC",
        "architecture": "ppc64le",
        "cpu_model": "POWER8",
        "sockets": 1,
        "cores_per_socket": 10,
        "memory_gib": 256,
        "raid_controller": "Adaptec ASR71605E",
        "notes": (
            "Servers 1 and 2 of Table 1 (they have the 960 GB SSD that holds the management and "
            "metadata targets). Table 1 states RAM as 256 GB. The RAID controller does not "
            "support RAID 6, hence RAID 0 (Section 2). InfiniBand EDR is 100 Gb/s by definition; "
            "the document names neither NIC models nor adapter counts."
        ),
        "source_ref": "Table 1; Section 2",
        "drives": [
            {
                "key": "data",
                "kind": "hdd",
                "model": "6 TB SATA",
                "count": 10,
                "capacity_gb": 6000,
                "interface": "sata",
                "purpose": "data",
                "source_ref": "Table 1 (RAID Volume)",
            },
            {
                "key": "metadata",
                "kind": "ssd",
                "model": "960 GB SSD",
                "count": 1,
                "capacity_gb": 960,
                "purpose": "metadata",
                "source_ref": "Table 1 (SSD); Section 2",
            },
            {
                "key": "os",
                "kind": "hdd",
                "model": "1 TB SATA",
                "count": 1,
                "capacity_gb": 1000,
                "interface": "sata",
                "purpose": "os",
                "source_ref": "Table 1 (OS HDD)",
            },
        ],
        "nics": [
            {
                "kind": "infiniband",
                "model": "InfiniBand EDR",
                "rate_gbps": 100,
                "source_ref": "Section 2",
            },
            {
                "kind": "ethernet",
                "model": "10-Gigabit Ethernet",
                "rate_gbps": 10,
                "source_ref": "Section 2",
            },
        ],
    },
    {
        "key": "s812lc",
        "name": "IBM S812LC (10x 6 TB RAID0, no SSD)",
        "vendor": "IBM",
        "model": "S812LC",
        "architecture": "ppc64le",
        "cpu_model": "POWER8",
        "sockets": 1,
        "cores_per_socket": 10,
        "memory_gib": 256,
        "raid_controller": "Adaptec ASR71605E",
        "notes": (
            "Servers 3 and 4 of Table 1 (no SSD). Table 1 states RAM as 256 GB. InfiniBand EDR "
            "is 100 Gb/s by definition; the document names neither NIC models nor adapter counts."
        ),
        "source_ref": "Table 1; Section 2",
        "drives": [
            {
                "key": "data",
                "kind": "hdd",
                "model": "6 TB SATA",
                "count": 10,
                "capacity_gb": 6000,
                "interface": "sata",
                "purpose": "data",
                "source_ref": "Table 1 (RAID Volume)",
            },
            {
                "key": "os",
                "kind": "hdd",
                "model": "1 TB SATA",
                "count": 1,
                "capacity_gb": 1000,
                "interface": "sata",
                "purpose": "os",
                "source_ref": "Table 1 (OS HDD)",
            },
        ],
        "nics": [
            {
                "kind": "infiniband",
                "model": "InfiniBand EDR",
                "rate_gbps": 100,
                "source_ref": "Section 2",
            },
            {
                "kind": "ethernet",
                "model": "10-Gigabit Ethernet",
                "rate_gbps": 10,
                "source_ref": "Section 2",
            },
        ],
    },
]

_OS = "Red Hat Enterprise Linux 7 for ppc64le"
_KERNEL = "3.10.0-327"
# The document numbers the servers 1-4; hostnames are ours.
NODES = [
    {
        "key": f"server{n}",
        "hostname": f"openpower-server{n}",
        "profile": "s812lc-ssd" if n <= 2 else "s812lc",
        "os": _OS,
        "kernel": _KERNEL,
        "notes": f"Server {n} of Tables 1 and 2 (hostname assigned by beeweb).",
        "source_ref": "Table 1; Section 2",
    }
    for n in (1, 2, 3, 4)
]

_XFS_MOUNT = "noatime,nodiratime,logbufs=8,logbsize=256k,largeio,inode64,swalloc,allocsize=131072k"
_EXT4_MOUNT = "noatime,nodiratime"

TESTBEDS = [
    {
        "key": "openpower",
        "name": "IBM OpenPOWER S812LC, 4 servers (ThinkParQ 2016)",
        "description": (
            "Four IBM S812LC servers; every server is a client and a storage server, server 1 "
            "also runs management and metadata, server 2 metadata (Table 2). Storage targets "
            "are one 10-disk RAID0 volume per server, metadata and management use the SSDs "
            "(Section 2). BeeGFS was built on the machines with GCC 4.9."
        ),
        "beegfs_version": "2015.03-r17",
        "fabric": "infiniband",
        "network_notes": (
            "InfiniBand EDR and 10-Gigabit Ethernet; services prefer ib0 (InfiniBand), then "
            "enP1 (Ethernet) (Section 2; connInterfacesList, Section 5)."
        ),
        "source_ref": "Tables 1-2; Section 2",
        "members": [
            {
                "node": "server1",
                "client": True,
                "storage": True,
                "metadata": True,
                "management": True,
            },
            {"node": "server2", "client": True, "storage": True, "metadata": True},
            {"node": "server3", "client": True, "storage": True},
            {"node": "server4", "client": True, "storage": True},
        ],
        "targets": [
            *[
                {
                    "key": f"st-server{n}",
                    "name": f"server{n} RAID0 volume (10x 6 TB SATA)",
                    "kind": "storage",
                    "node": f"server{n}",
                    "raid_level": "0",
                    "disks": 10,
                    "drive": ("s812lc-ssd" if n <= 2 else "s812lc", "data"),
                    "filesystem": "xfs",
                    "mount_options": _XFS_MOUNT,
                    "source_ref": "Table 1; Section 5.1",
                }
                for n in (1, 2, 3, 4)
            ],
            *[
                {
                    "key": f"mdt-server{n}",
                    "name": f"server{n} 960 GB SSD",
                    "kind": "metadata",
                    "node": f"server{n}",
                    "raid_level": "none",
                    "disks": 1,
                    "drive": ("s812lc-ssd", "metadata"),
                    "filesystem": "ext4",
                    "mount_options": _EXT4_MOUNT,
                    "source_ref": "Tables 1-2; Section 5.2",
                }
                for n in (1, 2)
            ],
        ],
    },
]

# Storage targets and metadata targets sit on different devices with different local file
# systems and IO scheduler settings. The known localfs/os keys describe the storage targets
# (they bound streaming throughput); the metadata SSD's values use "mdt."-prefixed keys.
TUNING_SETS = [
    {
        "key": "best",
        "name": "OpenPOWER best configuration (ThinkParQ 2016)",
        "description": (
            "The system and service tuning that gave the highest performance (Section 5). "
            "tunePreferredMetaFile points each client at the metadata service on its own "
            "machine; the document gives no path."
        ),
        "source_ref": "Section 5",
        "params": [
            # 5.1 storage service: formatting, XFS mount, IO scheduler, VM, controller.
            ("localfs", "raid_stripe_kb", "256", "Section 5.1 (Formatting Options)"),
            ("localfs", "raid_level", "0", "Section 5.1 (Formatting Options)"),
            ("localfs", "disks_per_array", "10", "Section 5.1 (Formatting Options)"),
            ("localfs", "filesystem", "xfs", "Section 5.1 (Formatting Options)"),
            (
                "localfs",
                "partition_alignment",
                "file system directly on the block device",
                "Section 5.1 (Formatting Options)",
            ),
            ("localfs", "mount_options", _XFS_MOUNT, "Section 5.1 (XFS Mount Options)"),
            ("localfs", "arcconf_setperform", "1", "Section 5.1 (Controller Settings)"),
            ("os", "scheduler", "deadline", "Section 5.1 (IO Scheduler Options)"),
            ("os", "nr_requests", "8192", "Section 5.1 (IO Scheduler Options)"),
            ("os", "read_ahead_kb", "4096", "Section 5.1 (IO Scheduler Options)"),
            ("os", "vm.dirty_background_ratio", "5", "Section 5.1 (Virtual Memory Settings)"),
            ("os", "vm.dirty_ratio", "20", "Section 5.1 (Virtual Memory Settings)"),
            ("os", "vm.vfs_cache_pressure", "50", "Section 5.1 (Virtual Memory Settings)"),
            ("os", "vm.min_free_kbytes", "262144", "Section 5.1 (Virtual Memory Settings)"),
            ("os", "transparent_hugepage", "never", "Section 5.1 (Virtual Memory Settings)"),
            ("os", "max_sectors_kb", "256", "Section 5.1 (Controller Settings)"),
            ("storage", "tuneNumWorkers", "48", "Section 5.1 (Storage Service Options)"),
            ("storage", "connInterfacesList", "ib0,enP1", "Section 5.1 (Storage Service Options)"),
            ("storage", "tuneFileReadAheadSize", "32m", "Section 5.1 (Storage Service Options)"),
            (
                "storage",
                "tuneFileReadAheadTriggerSize",
                "4m",
                "Section 5.1 (Storage Service Options)",
            ),
            ("storage", "tuneFileReadSize", "128k", "Section 5.1 (Storage Service Options)"),
            ("storage", "tuneFileWriteSize", "128k", "Section 5.1 (Storage Service Options)"),
            # 5.2 metadata service: ext4 on the SSD, its IO scheduler, service options.
            ("localfs", "mdt.filesystem", "ext4", "Section 5.2 (Formatting Options)"),
            (
                "localfs",
                "mdt.mkfs_options",
                "-Odir_index -l 512 -i 2048 -J size=400",
                "Section 5.2 (Formatting Options)",
            ),
            (
                "localfs",
                "mdt.extended_attributes",
                "user_xattr",
                "Section 5.2 (Formatting Options)",
            ),
            (
                "localfs",
                "mdt.partition_alignment",
                "file system directly on the device",
                "Section 5.2 (Formatting Options)",
            ),
            ("localfs", "mdt.mount_options", _EXT4_MOUNT, "Section 5.2 (EXT4 Mount Options)"),
            ("os", "mdt.scheduler", "deadline", "Section 5.2 (IO Scheduler Options)"),
            ("os", "mdt.nr_requests", "4096", "Section 5.2 (IO Scheduler Options)"),
            ("os", "mdt.read_ahead_kb", "8192", "Section 5.2 (IO Scheduler Options)"),
            ("meta", "tuneNumWorkers", "80", "Section 5.2 (Metadata Service Options)"),
            ("meta", "connMaxInternodeNum", "64", "Section 5.2 (Metadata Service Options)"),
            ("meta", "tuneTargetChooser", "randomrobin", "Section 5.2 (Metadata Service Options)"),
            ("meta", "connInterfacesList", "ib0,enP1", "Section 5.2 (Metadata Service Options)"),
            # 5.3 client.
            ("client", "connMaxInternodeNum", "32", "Section 5.3"),
            ("client", "connRDMABufNum", "70", "Section 5.3"),
            ("client", "connRDMABufSize", "8192", "Section 5.3"),
            ("client", "tuneRemoteFSync", "true", "Section 5.3"),
            ("client", "connInterfacesList", "ib0,enP1", "Section 5.3"),
            (
                "client",
                "tunePreferredMetaFile",
                "file with the node ID of the metadata service on the same machine",
                "Section 5.3",
            ),
            # 5.4 striping.
            ("striping", "chunksize", "512k", "Section 5.4"),
            ("striping", "numtargets", "4", "Section 5.4"),
        ],
    },
]

# Table 3: mean write / read throughput (GiB/s) per IOzone process count.
_TABLE3 = [(4, 6.27, 5.20), (8, 7.50, 6.10), (16, 7.52, 5.61), (32, 7.48, 5.44), (64, 7.30, 5.20)]
# Table 4: mean file creation / file stat rates (operations/s) per mdtest process count.
_TABLE4 = [
    (1, 4617, 18861),
    (2, 9081, 36757),
    (4, 14060, 61042),
    (8, 22550, 95205),
    (16, 39914, 170681),
    (32, 53024, 185325),
    (64, 54307, 184710),
]

_IOZONE = "/opt/iozone3_465/src/current/iozone"
_MDTEST = "/opt/mdtest-1.9.3/mdtest"

RUNS = [
    *[
        {
            "key": f"iozone-p{procs}",
            "testbed": "openpower",
            "tuning_set": "best",
            "tool": "iozone",
            "tool_version": "3.465",
            "label": f"IOzone sequential write/read, {procs} processes, 2,560 GiB",
            # The Section 6.1 script with its loop variable substituted.
            "command": (
                f"{_IOZONE} -i 0 -i 1 -c -e -w -r 1m -t {procs} -s {2560 // procs}g "
                "-+n -+m /opt/iozone3_465/nodes-list"
            ),
            "params": {
                "threads": procs,
                "nodes": 4,
                "record_size": 1 * MIB,
                "file_size": (2560 // procs) * GIB,
                "aggregate_size": 2560 * GIB,
                "file_per_process": True,
                "ops": ["write", "read"],
            },
            "notes": (
                "Mean of 3 repetitions (Section 4.1); the maximum and minimum are stated to be "
                "very close to the mean but are not given. 4 clients, 4 storage targets "
                "(Chart 1 caption)."
            ),
            "source_ref": "Table 3; Section 4.1; Section 6.1",
            "metrics": [
                {
                    "name": "write_bw",
                    "value": write * GIB,
                    "unit": "B/s",
                    "stat": "mean",
                    "source_ref": "Table 3",
                },
                {
                    "name": "read_bw",
                    "value": read * GIB,
                    "unit": "B/s",
                    "stat": "mean",
                    "source_ref": "Table 3",
                },
            ],
        }
        for procs, write, read in _TABLE3
    ],
    *[
        {
            "key": f"mdtest-p{procs}",
            "testbed": "openpower",
            "tuning_set": "best",
            "tool": "mdtest",
            "tool_version": "1.9.3",
            "label": f"mdtest file create/stat, {procs} processes, 1,000,000 files",
            # The Section 6.2 script with its loop variables substituted (bash integer division).
            "command": (
                f"mpirun --mca btl self,tcp --map-by node -hostfile /tmp/nodes-list "
                f"-np {procs} {_MDTEST} -C -T -d /mnt/beegfs/mdtest -i 5 "
                f"-I {1000000 // 64 // procs} -z 2 -b 8 -L -u -F -r"
            ),
            "params": {
                "threads": procs,
                # --map-by node spreads the processes over the 4 client machines.
                "nodes": min(procs, 4),
                "items_per_dir": 1000000 // 64 // procs,
                "iterations": 5,
                "depth": 2,
                "branch": 8,
                "unique_dir": True,
                "files_only": True,
                "create_only": True,
                "stat_only": True,
                "remove_only": True,
                "files_total": 1000000,
            },
            "notes": (
                "Mean values (Table 4). Section 4.2 says each execution was repeated 3 times; "
                "the Section 6.2 script passes -i 5. 4 clients, 2 metadata services (Charts 2 "
                "and 3 captions)."
            ),
            "source_ref": "Table 4; Section 4.2; Section 6.2",
            "metrics": [
                {
                    "name": "file_create",
                    "value": create,
                    "unit": "op/s",
                    "stat": "mean",
                    "source_ref": "Table 4",
                },
                {
                    "name": "file_stat",
                    "value": stat,
                    "unit": "op/s",
                    "stat": "mean",
                    "source_ref": "Table 4",
                },
            ],
        }
        for procs, create, stat in _TABLE4
    ],
]
