"""Seed 004: BITS Pilani paper on varying BeeGFS striping and target allocation, as plain data."""

from __future__ import annotations

KEY = "004"
SOURCE = (
    "004 BITS Pilani: Does Varying BeeGFS Configuration Affect the I/O Performance of HPC "
    "Workloads? (Borkar, Tony et al.)"
)

_METHOD = "Section III (Methodology)"
_ARCH_NOTE = "The paper states neither CPU nor architecture."
_ETHERNET = {
    "kind": "ethernet",
    "model": "1 Gbps Ethernet",
    "rate_gbps": 1,
    "source_ref": _METHOD,
}

PROFILES = [
    {
        "key": "client",
        "name": "BITS Pilani BeeGFS client node (8 GB)",
        "architecture": "other",
        "memory_gib": 8,
        "notes": f"Client node with 8GB of memory. {_ARCH_NOTE}",
        "source_ref": _METHOD,
        "drives": [],
        "nics": [_ETHERNET],
    },
    {
        "key": "oss",
        "name": "BITS Pilani BeeGFS object storage server (32 GB)",
        "architecture": "other",
        "memory_gib": 32,
        "notes": f"OSS with 32GB of DRAM and 3 OSTs. {_ARCH_NOTE} Drives are not described.",
        "source_ref": _METHOD,
        "drives": [],
        "nics": [_ETHERNET],
    },
    {
        "key": "server",
        "name": "BITS Pilani BeeGFS metadata/management server",
        "architecture": "other",
        "notes": f"MDS and MGS nodes; memory is not stated. {_ARCH_NOTE}",
        "source_ref": _METHOD,
        "drives": [],
        "nics": [_ETHERNET],
    },
]

# The paper names servers S_x (and targets S_x_T_y) but no hosts; hostnames are ours.
NODES = [
    *[
        {
            "key": f"client{n}",
            "hostname": f"bits-client{n}",
            "profile": "client",
            "notes": f"Client {n} of 4 (hostname assigned by beeweb).",
            "source_ref": _METHOD,
        }
        for n in range(1, 5)
    ],
    *[
        {
            "key": f"mds{n}",
            "hostname": f"bits-mds{n}",
            "profile": "server",
            "notes": f"Metadata server {n} of 2 (hostname assigned by beeweb).",
            "source_ref": _METHOD,
        }
        for n in range(1, 3)
    ],
    {
        "key": "mgs",
        "hostname": "bits-mgs",
        "profile": "server",
        "notes": "Management server (hostname assigned by beeweb).",
        "source_ref": _METHOD,
    },
    *[
        {
            "key": f"oss{n}",
            "hostname": f"bits-oss{n}",
            "profile": "oss",
            "notes": f"Object storage server S{n} of 3 (hostname assigned by beeweb).",
            "source_ref": _METHOD,
        }
        for n in range(1, 4)
    ],
]

TESTBEDS = [
    {
        "key": "cluster",
        "name": "BITS Pilani BeeGFS cluster, 10 nodes (1 Gbps Ethernet)",
        "description": (
            "4 clients, 2 metadata servers, 1 management server and 3 object storage servers "
            "with 3 OSTs each; 4.5TB total capacity. CPU, memory and network use monitored "
            "with the ELK stack; load per OST checked with beegfs-df. RAID level, drives and "
            "local file system of the OSTs are not stated."
        ),
        "beegfs_version": "7.3.2",
        "fabric": "ethernet",
        "network_notes": "All nodes connected via a 1Gbps Ethernet link.",
        "source_ref": f"{_METHOD}; Figure 3",
        "members": [
            *[{"node": f"client{n}", "client": True} for n in range(1, 5)],
            *[{"node": f"mds{n}", "metadata": True} for n in range(1, 3)],
            {"node": "mgs", "management": True},
            *[{"node": f"oss{n}", "storage": True} for n in range(1, 4)],
        ],
        "targets": [
            {
                "key": f"oss{n}-osts",
                "name": f"S{n}_T1-S{n}_T3",
                "kind": "storage",
                "node": f"oss{n}",
                # Not stated; "" shows as unknown (the RAID level choices have no such value).
                "raid_level": "",
                "count": 3,
                "source_ref": f"{_METHOD}; Figure 3",
            }
            for n in range(1, 4)
        ],
    },
]

_CONCURRENT = "Section IV-B.1 (Figure 5 text)"
TUNING_SETS = [
    {
        "key": "default",
        "name": "BeeGFS default striping (BITS Pilani)",
        "description": (
            "Default striping of BeeGFS 7.3.2 (512 KiB chunks, 4 targets) with the default "
            "random OST allocation (tuneTargetChooser randomized)."
        ),
        "source_ref": "Section IV-A",
        "params": [
            ("striping", "chunksize", "512k", "Section IV-A"),
            ("striping", "numtargets", "4", "Section IV-A"),
            ("meta", "tuneTargetChooser", "randomized", "Section IV-A"),
        ],
    },
    {
        "key": "roundrobin",
        "name": "Round-robin OST allocation (BITS Pilani)",
        "parent": "default",
        "description": "The round-robin OST allocation strategy compared with the default.",
        "source_ref": "Section IV-A; Figures 1-2",
        "params": [("meta", "tuneTargetChooser", "roundrobin", "Section IV-A")],
    },
    {
        "key": "ior-custom",
        "name": "IOR custom striping, 1 target x 16 MiB (BITS Pilani)",
        "parent": "default",
        "description": "Striping under which IOR performed better than with the default.",
        "source_ref": _CONCURRENT,
        "params": [
            ("striping", "numtargets", "1", _CONCURRENT),
            ("striping", "chunksize", "16m", _CONCURRENT),
        ],
    },
    {
        "key": "hacc-custom",
        "name": "HACC-IO custom striping, 2 targets x 16 MiB (BITS Pilani)",
        "parent": "default",
        "description": "Striping under which HACC-IO performed better than with the default.",
        "source_ref": _CONCURRENT,
        "params": [
            ("striping", "numtargets", "2", _CONCURRENT),
            ("striping", "chunksize", "16m", _CONCURRENT),
        ],
    },
    {
        "key": "dlio-custom",
        "name": "DLIO custom striping, 2 targets x 4 MiB (BITS Pilani)",
        "parent": "default",
        "description": "Striping under which DLIO performed better than with the default.",
        "source_ref": _CONCURRENT,
        "params": [
            ("striping", "numtargets", "2", _CONCURRENT),
            ("striping", "chunksize", "4m", _CONCURRENT),
        ],
    },
]

# Throughput and latency results are charts only (Figures 1, 2, 4, 5): nothing to load.
RUNS: list[dict] = []
