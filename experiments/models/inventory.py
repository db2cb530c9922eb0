"""Inventory: hardware profiles (datasheet), nodes (machines) and testbeds (BeeGFS layouts)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from experiments.models.common import (
    OwnedModel,
    PublishedModel,
    UUIDModel,
    published_key_constraint,
)
from experiments.shared import validators as bounds
from experiments.shared.validators import (
    validate_address,
    validate_count,
    validate_hostname,
    validate_positive,
    validate_slurm_name,
    validate_work_path,
)


class Architecture(models.TextChoices):
    X86_64 = "x86_64", "x86_64"
    AARCH64 = "aarch64", "aarch64 (Arm)"
    PPC64LE = "ppc64le", "ppc64le (POWER)"
    ARMV7L = "armv7l", "armv7l (32-bit Arm)"
    OTHER = "other", "other"


class HardwareProfile(OwnedModel, PublishedModel):
    """A server model as its datasheet describes it: CPU, memory, drives, RAID, NICs."""

    name = models.CharField(max_length=120, help_text='Short name, e.g. "R740xd 24x NVMe".')
    vendor = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=120, blank=True)
    architecture = models.CharField(max_length=16, choices=Architecture.choices)
    cpu_model = models.CharField("CPU model", max_length=160, blank=True)
    sockets = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[validate_count, bounds.SOCKETS]
    )
    cores_per_socket = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[validate_count, bounds.CORES_PER_SOCKET]
    )
    threads_per_core = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[validate_count, bounds.THREADS_PER_CORE]
    )
    clock_ghz = models.FloatField(
        "clock (GHz)", null=True, blank=True, validators=[MinValueValidator(0.01), bounds.CLOCK_GHZ]
    )
    numa_domains = models.PositiveSmallIntegerField(
        "NUMA domains", null=True, blank=True, validators=[validate_count, bounds.NUMA_DOMAINS]
    )
    memory_gib = models.FloatField(
        "memory (GiB)", null=True, blank=True, validators=[validate_positive, bounds.MEMORY_GIB]
    )
    memory_channels = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[validate_count, bounds.MEMORY_CHANNELS]
    )
    dimm_type = models.CharField("DIMM type", max_length=80, blank=True)
    raid_controller = models.CharField("RAID controller", max_length=160, blank=True)
    tdp_watts = models.PositiveIntegerField(
        "TDP (W)", null=True, blank=True, validators=[validate_count, bounds.TDP_WATTS]
    )
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [published_key_constraint()]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("experiments:hardware", args=[self.uuid])

    @property
    def total_cores(self) -> int | None:
        if self.sockets and self.cores_per_socket:
            return self.sockets * self.cores_per_socket
        return None


class DriveKind(models.TextChoices):
    NVME = "nvme", "NVMe"
    SSD = "ssd", "SSD"
    HDD = "hdd", "HDD"


class DriveInterface(models.TextChoices):
    PCIE = "pcie", "PCIe"
    SAS = "sas", "SAS"
    SATA = "sata", "SATA"
    OTHER = "other", "other"


class DrivePurpose(models.TextChoices):
    DATA = "data", "data (storage targets)"
    METADATA = "metadata", "metadata targets"
    OS = "os", "operating system"
    OTHER = "other", "other"


class Drive(UUIDModel):
    """A group of identical drives in a hardware profile, with datasheet performance."""

    profile = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE, related_name="drives")
    kind = models.CharField(max_length=8, choices=DriveKind.choices)
    model = models.CharField(max_length=160, blank=True)
    count = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), bounds.DRIVES]
    )
    capacity_gb = models.FloatField(
        "capacity (GB)",
        null=True,
        blank=True,
        validators=[validate_positive, bounds.DRIVE_CAPACITY_GB],
    )
    interface = models.CharField(max_length=8, choices=DriveInterface.choices, blank=True)
    pcie_gen = models.PositiveSmallIntegerField(
        "PCIe generation",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(6)],
    )
    pcie_lanes = models.PositiveSmallIntegerField(
        "PCIe lanes", null=True, blank=True, validators=[validate_count, bounds.PCIE_LANES]
    )
    seq_read_mbps = models.FloatField(
        "sequential read (MB/s)",
        null=True,
        blank=True,
        validators=[validate_positive, bounds.DRIVE_MBPS],
    )
    seq_write_mbps = models.FloatField(
        "sequential write (MB/s)",
        null=True,
        blank=True,
        validators=[validate_positive, bounds.DRIVE_MBPS],
    )
    rand_read_iops = models.FloatField(
        "random read IOPS", null=True, blank=True, validators=[validate_positive, bounds.DRIVE_IOPS]
    )
    rand_write_iops = models.FloatField(
        "random write IOPS",
        null=True,
        blank=True,
        validators=[validate_positive, bounds.DRIVE_IOPS],
    )
    purpose = models.CharField(max_length=10, choices=DrivePurpose.choices, default="data")

    class Meta:
        ordering = ["profile", "purpose", "id"]

    def __str__(self) -> str:
        size = f" {self.capacity_gb:g} GB" if self.capacity_gb else ""
        return f"{self.count}x {self.model or self.get_kind_display()}{size}"


class NicKind(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ETHERNET = "ethernet", "Ethernet"
    OMNIPATH = "omnipath", "Omni-Path"
    ROCE = "roce", "RoCE"


class Nic(UUIDModel):
    """Network adapters of a hardware profile."""

    profile = models.ForeignKey(HardwareProfile, on_delete=models.CASCADE, related_name="nics")
    kind = models.CharField(max_length=12, choices=NicKind.choices)
    model = models.CharField(max_length=160, blank=True)
    rate_gbps = models.FloatField(
        "rate (Gb/s)", validators=[MinValueValidator(0.001), bounds.NIC_RATE_GBPS]
    )
    ports = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), bounds.NIC_PORTS]
    )
    count = models.PositiveSmallIntegerField(
        "adapters", default=1, validators=[MinValueValidator(1), bounds.NIC_ADAPTERS]
    )
    usable_gbytes = models.FloatField(
        "usable GB/s per link",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.001), bounds.NIC_USABLE_GBYTES],
        help_text="Bandwidth one link carries in GB/s (decimal bytes), as a study states it "
        "or as measured (e.g. 12.4 for EDR InfiniBand); empty means the line rate / 8.",
    )
    usable_source = models.CharField(
        "usable bandwidth source",
        max_length=200,
        blank=True,
        help_text='Who states or measured the usable bandwidth, e.g. "Dell EMC 2019, '
        'Figure 9 text" or "ib_write_bw between node1 and node2".',
    )

    class Meta:
        ordering = ["profile", "-rate_gbps", "id"]

    def __str__(self) -> str:
        return f"{self.count}x {self.model or self.get_kind_display()} {self.rate_gbps:g} Gb/s"

    @property
    def links(self) -> int:
        return self.count * self.ports

    def clean(self) -> None:
        problem = bounds.usable_problem(self.rate_gbps, self.usable_gbytes)
        if problem:
            raise ValidationError({"usable_gbytes": problem})


class Node(OwnedModel, PublishedModel):
    """One machine of a hardware profile."""

    hostname = models.CharField(
        max_length=253,
        validators=[validate_hostname],
        help_text="RFC 1123 host name: letters, digits, hyphens and dots (e.g. stor01.lab).",
    )
    profile = models.ForeignKey(HardwareProfile, on_delete=models.PROTECT, related_name="nodes")
    address = models.CharField(
        max_length=255,
        blank=True,
        validators=[validate_address],
        help_text="IP address or DNS name.",
    )
    os = models.CharField("OS", max_length=120, blank=True)
    kernel = models.CharField(max_length=120, blank=True)
    notes = models.TextField(blank=True)
    shared = models.BooleanField(
        default=False, help_text="Other users may add this node to their testbeds."
    )

    class Meta:
        ordering = ["hostname"]
        constraints = [
            published_key_constraint(),
            models.UniqueConstraint(
                fields=["owner", "hostname"], name="%(app_label)s_%(class)s_unique_owner_hostname"
            ),
        ]

    def __str__(self) -> str:
        return self.hostname

    def get_absolute_url(self) -> str:
        return reverse("experiments:node", args=[self.uuid])


class Fabric(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ETHERNET = "ethernet", "Ethernet"
    OMNIPATH = "omnipath", "Omni-Path"
    ROCE = "roce", "RoCE"
    MIXED = "mixed", "mixed"


class TestbedQuerySet(models.QuerySet):
    def operable_by(self, user) -> TestbedQuerySet:
        """Testbeds ``user`` may launch on and store runs in (see ``Testbed.can_operate``)."""
        if not user.is_authenticated:
            return self.none()
        mine = self.filter(published=False)
        if user.is_staff:
            return mine
        granted = models.Q(owner=user) | models.Q(operators=user)
        granted |= models.Q(operator_groups__in=user.groups.all())
        return mine.filter(pk__in=self.filter(granted).values("pk"))


class Testbed(OwnedModel, PublishedModel):
    """Nodes with BeeGFS roles, storage and metadata targets, network and BeeGFS version.

    Its *operators* launch matrices on it and store runs in it: the owner, staff, and the
    users and groups the owner grants. Published testbeds accept no runs."""

    name = models.CharField(max_length=160)
    description = models.TextField(blank=True)
    beegfs_version = models.CharField(
        "BeeGFS version", max_length=60, blank=True, validators=[bounds.validate_beegfs_version]
    )
    fabric = models.CharField(max_length=12, choices=Fabric.choices, blank=True)
    switch = models.CharField(max_length=160, blank=True)
    network_notes = models.TextField(blank=True)
    benchmark_dir = models.CharField(
        max_length=400,
        blank=True,
        validators=[validate_work_path],
        help_text="Directory on the BeeGFS mount where benchmarks may write.",
    )
    independent_storage = models.BooleanField(
        default=False,
        help_text="Runs on different nodes do not share disks (e.g. independent local disks): "
        "a run holds only its launcher, clients and target node, not the storage and "
        "metadata servers. Comparisons say so for its points.",
    )
    # Slurm launch mode (runners.slurm): where Slurm owns the client nodes, a matrix in Slurm
    # mode asks this partition (and account) for them. Blank: not a Slurm testbed.
    slurm_partition = models.CharField(
        "Slurm partition",
        max_length=64,
        blank=True,
        validators=[validate_slurm_name],
        help_text="Slurm partition whose nodes are this testbed's clients (Slurm launch mode); "
        "blank when Slurm does not own them.",
    )
    slurm_account = models.CharField(
        "Slurm account",
        max_length=64,
        blank=True,
        validators=[validate_slurm_name],
        help_text="Slurm account charged for the jobs (blank: the user's default).",
    )
    operators = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="operated_testbeds",
        help_text="Users besides the owner and staff who may launch on this testbed and "
        "store runs in it.",
    )
    operator_groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="operated_testbeds",
        help_text="Groups whose members may launch on this testbed and store runs in it.",
    )

    # Topology from the live cluster (experiments.inventory.live): the node whose worker runs
    # beegfs-ctl for this testbed, and when its listing was last saved here. A testbed with
    # a live node is checked against its running cluster before a launch.
    live_node = models.ForeignKey(
        Node,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The node whose worker reads the live BeeGFS topology (beegfs-ctl) for "
        "this testbed.",
    )
    live_imported_at = models.DateTimeField(
        null=True, blank=True, help_text="When the live topology was last saved."
    )

    objects = TestbedQuerySet.as_manager()

    __test__ = False  # pytest: not a test class

    class Meta:
        ordering = ["name"]
        constraints = [published_key_constraint()]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("experiments:testbed", args=[self.uuid])

    def can_operate(self, user) -> bool:
        """Whether ``user`` may launch matrices on this testbed and store runs in it: its
        owner, staff, a granted user or a member of a granted group; nobody for published
        testbeds."""
        if self.published or not user.is_authenticated:
            return False
        if user.is_staff or self.owner_id == user.pk:
            return True
        if self.pk is None:
            return False
        return (
            self.operators.filter(pk=user.pk).exists()
            or self.operator_groups.filter(pk__in=user.groups.values("pk")).exists()
        )

    def runs_refused(self, user) -> str | None:
        """Why ``user`` may not store runs in (or launch on) this testbed, or None."""
        if self.published:
            return f"testbed {self.name!r} is published study data (read-only): it accepts no runs"
        if not self.can_operate(user):
            owner = self.owner.username if self.owner else "staff"
            return (
                f"you are not an operator of testbed {self.name!r}: ask its owner ({owner}) "
                "to grant you"
            )
        return None

    def may_use_node(self, node: Node, user=None) -> bool:
        """Whether ``node`` may join this testbed: it is the testbed owner's, its owner shares
        it, or ``user`` (who adds it) is staff. A published node (a machine of a study) joins
        no testbed of anyone's: nobody runs on it, and its facts are the study's."""
        if node.published and not self.published:
            return False
        if node.owner_id is not None and node.owner_id == self.owner_id:
            return True
        return bool(node.shared or (user is not None and user.is_staff))

    def member_clash(self, node: Node, exclude_pk: int | None = None) -> str | None:
        """Why ``node`` cannot be a member besides the present ones, or None: it is one
        already, or another member has its host name (say a published node and one's own
        node of the same machine). Runs find their launcher, MPI hosts and leases by host
        name, so two members of one name would be one machine counted twice."""
        others = self.members.select_related("node__owner")
        if exclude_pk is not None:
            others = others.exclude(pk=exclude_pk)
        for member in others:
            if member.node_id == node.pk:
                return "This node is already in the testbed; edit its roles instead."
            if member.node.hostname.lower() == node.hostname.lower():
                if member.node.published:
                    whose = "the published node"
                elif member.node.owner_id:
                    whose = f"{member.node.owner.username}'s node"
                else:
                    whose = "the node"
                return (
                    f"The testbed already has {whose} {member.node.hostname!r}: a testbed "
                    "holds each host once (edit that member's roles instead)."
                )
        return None

    def node_refused(self, node: Node, user=None) -> str | None:
        """Why ``node`` may not join this testbed, or None."""
        if self.may_use_node(node, user):
            return None
        if node.published:
            return (
                f"{node.hostname} is a published node (a machine of a study, read-only): it "
                "joins no testbed of yours; add your own node of that host instead"
            )
        if node.owner_id:
            whose = f"{node.owner.username}'s node"
        else:
            whose = "the published node" if node.published else "the ownerless node"
        return (
            f"{whose} {node.hostname} is not shared: only nodes of the testbed's owner and "
            "nodes their owner shares can join it"
        )


class TestbedNode(UUIDModel):
    """A node's BeeGFS roles in a testbed (one node may hold several)."""

    testbed = models.ForeignKey(Testbed, on_delete=models.CASCADE, related_name="members")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="memberships")
    management = models.BooleanField(default=False)
    metadata = models.BooleanField(default=False)
    storage = models.BooleanField(default=False)
    client = models.BooleanField(default=False)
    monitoring = models.BooleanField(default=False)
    storage_links = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[validate_count, bounds.LINKS],
        help_text="Network links that carry storage traffic; empty means all ports of its NICs.",
    )

    class Meta:
        ordering = ["testbed", "node__hostname"]
        constraints = [
            models.UniqueConstraint(
                fields=["testbed", "node"], name="%(app_label)s_%(class)s_unique_testbed_node"
            ),
        ]

    ROLES = ("management", "metadata", "storage", "client", "monitoring")
    __test__ = False  # pytest: "Test…" is a domain word here, not a test class

    def __str__(self) -> str:
        return f"{self.node} ({', '.join(self.role_names) or 'no role'})"

    @property
    def role_names(self) -> list[str]:
        return [role for role in self.ROLES if getattr(self, role)]


class StoragePool(UUIDModel):
    """A BeeGFS storage pool of a testbed."""

    testbed = models.ForeignKey(Testbed, on_delete=models.CASCADE, related_name="pools")
    pool_id = models.PositiveIntegerField("pool ID")
    name = models.CharField(max_length=120)

    class Meta:
        ordering = ["testbed", "pool_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["testbed", "pool_id"], name="%(app_label)s_%(class)s_unique_testbed_pool"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.pool_id})"


class TargetKind(models.TextChoices):
    STORAGE = "storage", "storage target"
    METADATA = "metadata", "metadata target"


class RaidLevel(models.TextChoices):
    RAID0 = "0", "RAID0"
    RAID1 = "1", "RAID1"
    RAID5 = "5", "RAID5"
    RAID6 = "6", "RAID6"
    RAID10 = "10", "RAID10"
    NONE = "none", "none (single drive)"


class LocalFs(models.TextChoices):
    XFS = "xfs", "xfs"
    EXT4 = "ext4", "ext4"
    ZFS = "zfs", "zfs"
    BTRFS = "btrfs", "btrfs"


class Target(UUIDModel):
    """A BeeGFS storage or metadata target: an array of drives with a local file system."""

    testbed = models.ForeignKey(Testbed, on_delete=models.CASCADE, related_name="targets")
    kind = models.CharField(max_length=10, choices=TargetKind.choices, default="storage")
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="targets"
    )
    target_id = models.PositiveIntegerField("BeeGFS target ID", null=True, blank=True)
    name = models.CharField(max_length=160, blank=True, help_text="Device or label.")
    numa_domain = models.PositiveSmallIntegerField("NUMA domain", null=True, blank=True)
    raid_level = models.CharField("RAID level", max_length=4, choices=RaidLevel.choices)
    disks = models.PositiveSmallIntegerField(
        "disks per array",
        null=True,
        blank=True,
        validators=[MinValueValidator(1), bounds.TARGET_DISKS],
    )
    drive = models.ForeignKey(
        Drive,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Drive model of the array; empty means the node's data drives.",
    )
    filesystem = models.CharField(
        "local file system", max_length=8, choices=LocalFs.choices, blank=True
    )
    mount_options = models.CharField(max_length=400, blank=True)
    path = models.CharField(
        "mount point",
        max_length=400,
        blank=True,
        validators=[validate_work_path],
        help_text="Where the target is mounted on its node; local benchmarks of this target "
        "write below it.",
    )
    capacity_gb = models.FloatField(
        "capacity (GB)",
        null=True,
        blank=True,
        validators=[validate_positive, bounds.TARGET_CAPACITY_GB],
    )
    pool = models.ForeignKey(
        StoragePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="targets"
    )
    count = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), bounds.TARGETS],
        help_text="Identical targets this row stands for (e.g. 6 per server).",
    )

    class Meta:
        ordering = ["testbed", "kind", "node__hostname", "target_id", "id"]

    def __str__(self) -> str:
        label = self.name or (f"#{self.target_id}" if self.target_id is not None else "target")
        return f"{label} ({self.get_raid_level_display()}, {self.get_kind_display()})"


class MirrorGroup(UUIDModel):
    """A BeeGFS buddy mirror group: two storage targets, or two metadata nodes' targets."""

    testbed = models.ForeignKey(Testbed, on_delete=models.CASCADE, related_name="mirror_groups")
    kind = models.CharField(max_length=10, choices=TargetKind.choices, default="storage")
    group_id = models.PositiveIntegerField("buddy group ID")
    primary = models.ForeignKey(
        Target, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    secondary = models.ForeignKey(
        Target, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["testbed", "kind", "group_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["testbed", "kind", "group_id"],
                name="%(app_label)s_%(class)s_unique_testbed_kind_group",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} buddy group {self.group_id}"
