"""``manage.py local_raid``: a real RAID0 vs RAID10 comparison on this machine (as root).

Builds two btrfs file systems over loop-file "disks" (md RAID is not available in these kernels;
btrfs data/metadata profiles are), mounts them and registers them as storage targets of the
localhost testbed::

    DIR/disks/raid0-1.img …  sparse files, one loop device each
    DIR/raid0/bench          btrfs -d raid0  -m raid0   → Target "btrfs-raid0"  (RAID0)
    DIR/raid10/bench         btrfs -d raid10 -m raid10  → Target "btrfs-raid10" (RAID10)

Re-running finds the arrays mounted and only reports; ``--teardown`` unmounts, detaches, deletes
the files and the two targets (the testbed stays, and so does a target that runs refer to).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.inventory.localhost import ensure_localhost_testbed, localhost_node
from experiments.models import Target, Testbed
from runners import nodeconfig
from runners.parsers import base as parsers

LEVELS = ("0", "10")
BTRFS_MIN_DEVICE_BYTES = 131072000  # mkfs.btrfs: "minimum size for each btrfs device"
SBIN_PATH = "/usr/local/sbin:/usr/sbin:/sbin"
# Debian packages of the tools, for the error message when one is missing.
TOOLS = {
    "losetup": "mount",
    "mount": "mount",
    "umount": "mount",
    "mkfs.btrfs": "btrfs-progs",
    "btrfs": "btrfs-progs",
}
LOOP_MAJOR = 7
LOOP_CTL_GET_FREE = 0x4C82
BTRFS_SUPER_OFFSET = 0x10000
BTRFS_MAGIC = b"_BHRfS_M"


def parse_size(text: str) -> int:
    """``2G``, ``300M``, ``512MiB``, ``1073741824`` → bytes (binary units, like truncate)."""
    try:
        return parsers.parse_size(text)
    except parsers.ParseError:
        raise CommandError(f"--disk-size must look like 2G or 300M, got {text!r}") from None


def human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:g} {unit}"
        size /= 1024
    return f"{size:g} TiB"


def tool(name: str) -> str:
    """Absolute path of a system tool; sbin directories count even if PATH lacks them."""
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SBIN_PATH}")
    if found is None:
        package = TOOLS.get(name, name)
        raise CommandError(f"{package} is not installed: apt-get install {package}")
    return found


def run(argv: list[str]) -> str:
    """Run a tool (argv list, no shell); its stdout, or a CommandError carrying its stderr."""
    try:
        proc = subprocess.run(
            [tool(argv[0]), *argv[1:]], check=True, capture_output=True, text=True
        )
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or "").strip()
        raise CommandError(f"{' '.join(argv)} failed: {detail}") from None
    return proc.stdout


def check_requirements() -> None:
    """Root, the tools and kernel btrfs; CommandError saying what is missing."""
    if os.geteuid() != 0:
        raise CommandError(
            "local_raid needs root: it attaches loop devices and mounts file "
            "systems (run it with sudo)"
        )
    for name in TOOLS:
        tool(name)
    if not btrfs_in_kernel():
        modprobe = shutil.which("modprobe", path=f"{os.environ.get('PATH', '')}:{SBIN_PATH}")
        if modprobe:
            subprocess.run([modprobe, "btrfs"], capture_output=True, check=False)
        if not btrfs_in_kernel():
            raise CommandError(
                "this kernel has no btrfs support (not in /proc/filesystems and "
                "modprobe btrfs failed)"
            )


def btrfs_in_kernel() -> bool:
    try:
        return any(
            line.split()[-1] == "btrfs"
            for line in Path("/proc/filesystems").read_text().splitlines()
            if line.strip()
        )
    except OSError:
        return False


def loops_of(path: Path) -> list[str]:
    """Loop devices backed by ``path`` (``losetup -j``)."""
    out = run(["losetup", "-j", str(path)])
    return [line.split(":", 1)[0] for line in out.splitlines() if line.strip()]


def make_free_loop_node() -> str | None:
    """Ask /dev/loop-control for a free loop device and create its node if missing.

    Containers often have /dev/loop-control but no /dev/loopN nodes, so ``losetup --find``
    finds nothing; the kernel still hands out devices.
    """
    control = Path("/dev/loop-control")
    if not control.exists():
        return None
    fd = os.open(control, os.O_RDWR)
    try:
        index = fcntl.ioctl(fd, LOOP_CTL_GET_FREE)
    finally:
        os.close(fd)
    node = Path(f"/dev/loop{index}")
    if not node.exists():
        os.mknod(node, 0o660 | stat.S_IFBLK, os.makedev(LOOP_MAJOR, index))
    return str(node)


def attach_loop(path: Path) -> str:
    """Attach ``path`` to a free loop device; its name.

    Direct I/O keeps the backing file's page cache out of the measurement; file systems without
    O_DIRECT get a plain loop device.
    """
    errors = []
    for direct in (["--direct-io=on"], []):
        try:
            return run(["losetup", "--find", "--show", *direct, str(path)]).strip()
        except CommandError as exc:
            errors.append(str(exc))
    try:
        node = make_free_loop_node()
    except OSError as exc:
        errors.append(f"creating a loop device node: {exc}")
        node = None
    if node is not None:
        try:
            run(["losetup", node, str(path)])
            return node
        except CommandError as exc:
            errors.append(str(exc))
    hint = (
        ""
        if Path("/dev/loop-control").exists()
        else (" (no /dev/loop-control: in a container, run privileged or pass the loop devices in)")
    )
    raise CommandError(f"cannot attach {path} to a loop device{hint}: {'; '.join(errors)}")


def btrfs_super(path: Path) -> dict | None:
    """Label, fsid and device count from the btrfs superblock of a device or image file."""
    try:
        with open(path, "rb") as handle:
            handle.seek(BTRFS_SUPER_OFFSET)
            block = handle.read(0x22B)
    except OSError:
        return None
    if len(block) < 0x22B or block[0x40:0x48] != BTRFS_MAGIC:
        return None
    return {
        "fsid": block[0x20:0x30].hex(),
        "num_devices": int.from_bytes(block[0x88:0x90], "little"),
        "label": block[0x12B:0x22B].split(b"\0", 1)[0].decode(errors="replace"),
    }


@dataclass(frozen=True)
class Array:
    """One btrfs array of loop files under ``root``."""

    root: Path
    level: str

    @property
    def name(self) -> str:
        return f"btrfs-raid{self.level}"

    @property
    def label(self) -> str:
        return f"beeweb-raid{self.level}"

    @property
    def mountpoint(self) -> Path:
        return self.root / f"raid{self.level}"

    @property
    def bench(self) -> Path:
        return self.mountpoint / "bench"

    @property
    def disk_dir(self) -> Path:
        return self.root / "disks"

    def disk(self, i: int) -> Path:
        return self.disk_dir / f"raid{self.level}-{i}.img"

    def existing_disks(self) -> list[Path]:
        return sorted(
            self.disk_dir.glob(f"raid{self.level}-*.img"),
            key=lambda p: int(p.stem.rsplit("-", 1)[1]),
        )

    def mount(self) -> dict[str, str] | None:
        """What is mounted at the mount point itself (``nodeconfig.mount_of``), else None."""
        found = nodeconfig.mount_of(self.mountpoint)
        return found if found.get("mount_point") == str(self.mountpoint) else None

    def capacity_gb(self) -> float:
        fs = os.statvfs(self.mountpoint)
        return round(fs.f_blocks * fs.f_frsize / 1e9, 2)

    def valid_fs(self, disks: list[Path]) -> bool:
        """The image files already hold this array's complete file system."""
        supers = [btrfs_super(disk) for disk in disks]
        return (
            all(s and s["label"] == self.label and s["num_devices"] == len(disks) for s in supers)
            and len({s["fsid"] for s in supers}) == 1
        )


class Command(BaseCommand):
    help = (
        "Build btrfs RAID0 and RAID10 arrays over loop files, mount them and register them "
        "as storage targets of the localhost testbed (root only)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dir", help="Where disk files and mount points go (default: $BEEWEB_DATA_DIR/raid)."
        )
        parser.add_argument(
            "--disks", type=int, default=4, help="Disks per array, even and at least 4 (default 4)."
        )
        parser.add_argument(
            "--disk-size",
            default="2G",
            help="Size of each sparse disk file, e.g. 2G or 300M (default 2G).",
        )
        parser.add_argument(
            "--testbed",
            default="localhost",
            help='Testbed to register the targets in (default "localhost").',
        )
        parser.add_argument(
            "--owner", help="Username owning the testbed (default: the first superuser)."
        )
        parser.add_argument(
            "--teardown",
            action="store_true",
            help="Unmount, detach and delete the arrays and their two targets.",
        )

    def handle(self, *args, **options):
        # Resolved, because /proc/self/mounts lists mount points without symlinks.
        root = Path(options["dir"] or Path(settings.DATA_DIR) / "raid").resolve()
        arrays = [Array(root, level) for level in LEVELS]
        if options["teardown"]:
            check_requirements()
            self.teardown(arrays, root)
            self.unregister(arrays, options["owner"], options["testbed"])
            return
        disks, size = options["disks"], parse_size(options["disk_size"])
        if disks < 4 or disks % 2:
            raise CommandError(
                "--disks must be even and at least 4: RAID10 stripes over mirrored pairs"
            )
        if size < BTRFS_MIN_DEVICE_BYTES:
            raise CommandError(
                f"--disk-size must be at least {BTRFS_MIN_DEVICE_BYTES // 2**20}M"
                ": btrfs refuses smaller devices"
            )
        check_requirements()
        owner = self.owner(options["owner"])
        for array in arrays:
            self.build(array, disks, size)
        self.register(arrays, owner, options["testbed"])

    # --- building ---------------------------------------------------------------------------

    def build(self, array: Array, disks: int, size: int) -> None:
        current = array.mount()
        if current is not None:
            if current["fstype"] != "btrfs":
                raise CommandError(
                    f"{array.mountpoint} is already mounted ({current['fstype']} "
                    f"from {current['source']}); pick another --dir"
                )
            array.bench.mkdir(exist_ok=True)
            self.stdout.write(
                f"raid{array.level}: already mounted at {array.mountpoint} "
                f"({array.capacity_gb():g} GB); nothing to build"
            )
            return
        existing = array.existing_disks()
        if existing and len(existing) != disks:
            raise CommandError(
                f"{array.disk_dir} holds {len(existing)} disk files for "
                f"raid{array.level}, not {disks}: run with --teardown first "
                f"or pass --disks {len(existing)}"
            )
        self.warn_space(array.root, 2 * disks * size if not existing else 0)
        created: list[Path] = []
        attached: list[str] = []
        try:
            array.disk_dir.mkdir(parents=True, exist_ok=True)
            files = existing or [array.disk(i) for i in range(1, disks + 1)]
            for path in files:
                if not path.exists():
                    # Sparse: the files take space only as benchmarks write.
                    with open(path, "wb") as handle:
                        handle.truncate(size)
                    created.append(path)
            devices = []
            for path in files:
                found = loops_of(path)
                if not found:
                    found = [attach_loop(path)]
                    attached.append(found[0])
                devices.append(found[0])
            if existing and array.valid_fs(files):
                action = f"reused the btrfs on {len(files)} existing disk files"
            else:
                profile = f"raid{array.level}"
                run(["mkfs.btrfs", "-f", "-L", array.label, "-d", profile, "-m", profile, *devices])
                action = (
                    f"created {len(files)} × {human(os.path.getsize(files[0]))} disk "
                    f"files, mkfs.btrfs -d {profile} -m {profile}"
                )
            array.mountpoint.mkdir(parents=True, exist_ok=True)
            # Naming every device lets the kernel assemble the array without udev's scan.
            device_options = ",".join(f"device={device}" for device in devices)
            run(["mount", "-t", "btrfs", "-o", device_options, devices[0], str(array.mountpoint)])
        except BaseException:
            self.rollback(array, attached, created)
            raise
        array.bench.mkdir(exist_ok=True)
        # Sticky and world-writable like /tmp: workers may run as an unprivileged user.
        array.bench.chmod(0o1777)
        self.stdout.write(
            f"raid{array.level}: {action}; {', '.join(devices)} mounted at "
            f"{array.mountpoint} ({array.capacity_gb():g} GB)"
        )

    def rollback(self, array: Array, attached: list[str], created: list[Path]) -> None:
        """Undo a half-built array: only what this run attached or created."""
        if array.mount() is not None and attached:
            subprocess.run(
                [tool("umount"), str(array.mountpoint)], capture_output=True, check=False
            )
        for device in attached:
            subprocess.run(
                [tool("btrfs"), "device", "scan", "--forget", device],
                capture_output=True,
                check=False,
            )
            subprocess.run([tool("losetup"), "-d", device], capture_output=True, check=False)
        for path in created:
            path.unlink(missing_ok=True)

    def warn_space(self, root: Path, needed: int) -> None:
        probe = root
        while not probe.exists():
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        if needed > free:
            self.stderr.write(
                self.style.WARNING(
                    f"{probe} has {human(free)} free but the disk files may grow to "
                    f"{human(needed)}; "
                    "writes beyond the free space will fail"
                )
            )

    # --- inventory --------------------------------------------------------------------------

    def owner(self, username: str | None):
        User = get_user_model()
        if username:
            try:
                return User.objects.get(username=username)
            except User.DoesNotExist:
                raise CommandError(f"no user {username!r}") from None
        user = User.objects.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError(
                "no owner: pass --owner USERNAME (or create an admin with manage.py ensure_admin)"
            )
        return user

    @transaction.atomic
    def register(self, arrays: list[Array], owner, testbed_name: str) -> None:
        testbed = ensure_localhost_testbed(owner, name=testbed_name)
        node = localhost_node(owner)
        for array in arrays:
            disks = len(array.existing_disks())
            fields = {
                "kind": "storage",
                "raid_level": array.level,
                "disks": disks,
                "filesystem": "btrfs",
                "path": str(array.bench),
                "capacity_gb": array.capacity_gb(),
                "mount_options": (array.mount() or {}).get("options", "")[:400],
                "count": 1,
            }
            target = Target.objects.filter(testbed=testbed, node=node, name=array.name).first()
            if target is None:
                Target.objects.create(testbed=testbed, node=node, name=array.name, **fields)
                verb = "registered"
            else:
                changed = [f for f, value in fields.items() if getattr(target, f) != value]
                for f in changed:
                    setattr(target, f, fields[f])
                if changed:
                    target.save(update_fields=changed)
                verb = "updated" if changed else "unchanged"
            self.stdout.write(
                f"target {array.name} (RAID{array.level}, {disks} disks, "
                f"{fields['capacity_gb']:g} GB) in testbed {testbed.name!r} "
                f"of {owner}: {verb}"
            )

    def unregister(self, arrays: list[Array], username: str | None, testbed_name: str) -> None:
        try:
            owner = self.owner(username)
        except CommandError as exc:
            self.stderr.write(f"targets left in the inventory: {exc}")
            return
        testbeds = Testbed.objects.filter(owner=owner, name=testbed_name, published=False)
        targets = Target.objects.filter(
            testbed__in=testbeds,
            node=localhost_node(owner),
            filesystem="btrfs",
            name__in=[array.name for array in arrays],
        )
        # Deleting a target would cut its runs loose (SET_NULL): the RAID0 vs RAID10 results
        # would no longer say which array they measured. Those targets stay.
        for target in targets.filter(runs__isnull=False).distinct():
            self.stdout.write(
                f"kept target {target.name}: {target.runs.count()} run(s) refer "
                "to it; a rebuild reuses it"
            )
        deleted, _ = targets.filter(runs__isnull=True).delete()
        self.stdout.write(f"removed {deleted} target(s) from testbed {testbed_name!r} of {owner}")

    # --- teardown ---------------------------------------------------------------------------

    def teardown(self, arrays: list[Array], root: Path) -> None:
        for array in arrays:
            done = []
            if array.mount() is not None:
                try:
                    run(["umount", str(array.mountpoint)])
                except CommandError as exc:
                    raise CommandError(
                        f"{exc} (still in use? see: fuser -vm {array.mountpoint})"
                    ) from None
                done.append(f"unmounted {array.mountpoint}")
            disks = array.existing_disks()
            devices = [device for path in disks for device in loops_of(path)]
            for device in devices:
                # Drop the kernel's memory of the device, or a later array on the same loop
                # number could be assembled with stale members.
                subprocess.run(
                    [tool("btrfs"), "device", "scan", "--forget", device],
                    capture_output=True,
                    check=False,
                )
                run(["losetup", "-d", device])
            for path in disks:
                path.unlink()
            if array.mountpoint.is_dir():
                try:
                    array.mountpoint.rmdir()
                except OSError:
                    self.stderr.write(f"{array.mountpoint} is not empty; left in place")
            if devices:
                done.append(f"detached {', '.join(devices)}")
            if disks:
                done.append(f"deleted {len(disks)} disk files")
            self.stdout.write(f"raid{array.level}: {'; '.join(done) or 'nothing to remove'}")
        for directory in (root / "disks", root):
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
