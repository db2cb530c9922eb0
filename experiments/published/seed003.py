"""Seed 003: INFN CNAF slides "BeeGFS tests on Low power SoC" (Oct 2017), as plain data."""

from __future__ import annotations

KEY = "003"
SOURCE = (
    "003 INFN CNAF: BeeGFS tests on Low power SoC (A. Falabella, L. Lama; Second "
    "ASTERICS-OBELICS Workshop, Oct 2017)"
)

# The slides have no numbered tables; references name the slide by its content.
_CPU_TABLE = "Test bed slide (CPU / Freq / Cores / RAM / TDP / Cost table)"
_COSA = "COSA slide (4x Intel Avoton C-2750, 4x Intel Xeon D-1540)"
_DRIVES = "Test bed slide (storage and metadata drives)"

# Which CPU type serves which BeeGFS role is only shown in a figure, so the drives the text
# names cannot be placed in a profile; their datasheet values go into the testbed description.
PROFILES = [
    {
        "key": "avoton",
        "name": "Intel Avoton C2750 low-power server (INFN COSA)",
        "vendor": "Intel",
        "model": "Avoton C2750 SoC",
        "architecture": "x86_64",
        "cpu_model": "Intel Avoton C2750",
        "sockets": 1,
        "cores_per_socket": 8,
        "clock_ghz": 2.4,
        "memory_gib": 16,
        "tdp_watts": 20,
        "notes": "Cost 100 euro. The slides state RAM as 16GB.",
        "source_ref": _CPU_TABLE,
        "drives": [],
        "nics": [],
    },
    {
        "key": "xeond",
        "name": "Intel Xeon D-1540 low-power server (INFN COSA)",
        "vendor": "Intel",
        "model": "Xeon D-1540 SoC",
        "architecture": "x86_64",
        "cpu_model": "Intel Xeon D-1540",
        "sockets": 1,
        "cores_per_socket": 8,
        "clock_ghz": 2.6,
        "memory_gib": 16,
        "tdp_watts": 50,
        "notes": "Cost 900 euro. The slides state RAM as 16GB.",
        "source_ref": _CPU_TABLE,
        "drives": [],
        "nics": [],
    },
]

NODES = [
    *[
        {
            "key": f"avoton{n}",
            "hostname": f"cosa-avoton{n}",
            "profile": "avoton",
            "notes": f"Avoton C2750 machine {n} of 4 in COSA (hostname assigned by beeweb).",
            "source_ref": _COSA,
        }
        for n in range(1, 5)
    ],
    *[
        {
            "key": f"xeond{n}",
            "hostname": f"cosa-xeond{n}",
            "profile": "xeond",
            "notes": f"Xeon D-1540 machine {n} of 4 in COSA (hostname assigned by beeweb).",
            "source_ref": _COSA,
        }
        for n in range(1, 5)
    ],
]

TESTBEDS = [
    {
        "key": "lowpower",
        "name": "INFN CNAF low-power SoC BeeGFS test bed (2017)",
        "description": (
            "BeeGFS on low-power x86 SoC servers (Intel Avoton C2750 and Xeon D-1540) of the "
            "COSA cluster. Which machine holds which BeeGFS role is shown only in a figure, so "
            "no roles are recorded; the number of storage servers was varied (read throughput "
            "saturates the link with four). Storage servers use 8TB spinning disks (Seagate "
            "ST8000AS0002 8000GB SATA: 128 MB cache, SATA 6.0/3.0/1.5 Gb/s, average data rate "
            "read/write 150 MB/s, max sustained OD read 190 MB/s); the metadata server uses a "
            "500GB Samsung SSD 850 EVO (sequential read max 540 MB/s, sequential write max "
            "520 MB/s, 4KB random read QD1 max 10,000 IOPS, 4KB random write QD1 max 40,000 "
            "IOPS, 4KB random read QD32 max 98,000 IOPS and random write QD32 max 90,000 IOPS "
            "for the 500GB model). Tools: dd, an MPI checkpoint/restart simulator, mdtest."
        ),
        "source_ref": "Test bed slides (CPU table; COSA; storage/metadata drives; datasheets)",
        "members": [
            *[{"node": f"avoton{n}"} for n in range(1, 5)],
            *[{"node": f"xeond{n}"} for n in range(1, 5)],
        ],
        "targets": [
            {
                "key": "mdt-ssd",
                "name": "Samsung SSD 850 EVO 500GB (metadata server)",
                "kind": "metadata",
                "raid_level": "none",
                "disks": 1,
                "capacity_gb": 500,
                "source_ref": _DRIVES,
            },
        ],
    },
]

TUNING_SETS: list[dict] = []

# dd, the checkpoint/restart simulator and mdtest results are charts only: nothing to load.
RUNS: list[dict] = []
