"""BeeGFS CLI topology parser (beegfs-ctl 7.x, beegfs-df, BeeGFS 8 `beegfs`): no metrics."""

# The result has ``tool="beegfs"``, ``metrics=[]`` and everything in ``extra["topology"]``:
#
#   kind           "nodes" | "targets" | "mirror_groups" | "entry_info" | "df" | "pools" |
#                  "migrate"
#   cli            "beegfs-ctl" (7.x), "beegfs-df" (7.x) or "beegfs" (8.x)
#   nodes          [{"id": int, "type": str|None, "name": str|None, ...}]
#                  type is "meta" | "storage" | "client" | "management"; v8's ALIAS is "name";
#                  v7 --details adds "ports" {"udp", "tcp"} and "interfaces" [{"name", "type"}]
#   targets        [{"id": int, "type": str|None, "name": str|None, "node_id": int|None,
#                    "node_name": str|None, "pool": int|None, "pool_name": str|None,
#                    "reachability": str|None, "consistency": str|None, "cap_pool": str|None,
#                    "total_bytes", "used_bytes", "free_bytes": int|None,
#                    "inodes_total", "inodes_used", "inodes_free": int|None,
#                    "mirror_group": int|None, "mirror_role": "primary"|"secondary"|None}]
#                  States and capacity pools are lower case ("online", "probably-offline",
#                  "needs-resync", "low"). Only the keys a listing shows are present.
#   mirror_groups  [{"id": int, "type": str|None, "primary": int, "secondary": int,
#                    "primary_node_id"?, "secondary_node_id"?}]  (primary/secondary are node IDs
#                  for metadata groups, target IDs for storage groups)
#   pools          [{"id": int, "name": str|None, "targets": [int], "mirror_groups": [int]}]
#   entry          {"path", "entry_id", "entry_type", "meta_node_id", "meta_node_name",
#                   "meta_mirror_group", "pattern", "chunk_size" (bytes), "num_targets"
#                   (desired), "actual_targets", "pool", "pool_name", "storage_targets" [int],
#                   "storage_mirror_groups" [int], "remote_targets" [str], ...verbose extras}
#   entries        every entry when an output holds several (entry is the first)
#   migrate        v8 `entry migrate` Summary counters, snake_case ("migrated_files": 1, ...)
#   warnings       lines that looked like table rows but could not be read
#
# Units: sizes are bytes (GiB/TiB/MiB binary, GB/TB decimal as printed), inode counts plain
# numbers (k/M/G are decimal: beegfs-df's "4294.0M" is XFS's 2^32 inodes). Node types are not
# printed by `beegfs-ctl --listnodes`/`--listtargets`; pass ``node_type="meta"`` to set them.

from __future__ import annotations

import re
import textwrap
from typing import Any

from runners.parsers.base import ParseError, ParseResult, guard_parse, parse_size, split_lines

TOOL = "beegfs"

_TYPE_PREFIX = {"c": "client", "m": "meta", "s": "storage", "mg": "management"}
# Node type words of the CLIs' output (v7 and v8), as beeweb names the node types; the
# topology import reads its section headers with them too.
NODE_TYPES = {
    "meta": "meta",
    "metadata": "meta",
    "storage": "storage",
    "client": "client",
    "management": "management",
    "mgmt": "management",
    "mgmtd": "management",
}
_V8_HEADER_RE = re.compile(r"^(ID|PATH|UID)\s{2,}[A-Z]")
_V7_UNDERLINE_RE = re.compile(r"^\s*=+(\s+=+)+\s*$")
_LISTNODE_RE = re.compile(r"^(\S+)\s+\[ID:\s*(\d+)\]\s*$")
_NAMED_ID_RE = re.compile(r"(?:beegfs-(?:storage|meta|mgmtd)\s+)?(\S+)\s+\[ID:\s*(\d+)\]")
_MIGRATE_RE = re.compile(r"^\s*Summary:\s*\{(.*)\}\s*$")
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGTPE]i?)?B$")
_COUNT_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kKMGTP]?)$")


def detect(text: str) -> float:
    """Confidence that ``text`` is BeeGFS CLI topology output."""
    if not text or not text.strip():
        return 0.0
    if re.search(r"^\s*Server benchmark status:|benchmark results:", text, re.M):
        return 0.05  # StorageBench status: its own parser
    lines = [ln for ln in split_lines(text) if ln.strip()]
    first = lines[0].strip() if lines else ""
    if re.search(r"^##\s+(Metadata|Storage) Targets\s*$", text, re.M):
        return 0.95
    if _MIGRATE_RE.search(text) and "Migrat" in text:
        return 0.95
    if re.search(r"^\s*METADATA SERVERS:\s*$", text, re.M) or re.search(
        r"^\s*STORAGE TARGETS:\s*$", text, re.M
    ):
        return 0.95
    if re.search(r"^\s*Stripe pattern details:\s*$", text, re.M) or re.search(
        r"^\s*EntryID:\s*\S+", text, re.M
    ):
        return 0.95
    if _V8_HEADER_RE.match(first) and re.search(r"\b(TYPE|ALIAS|ENTRY_ID|TARGETS)\b", first):
        return 0.95
    for i, line in enumerate(lines[:-1]):
        if _V7_UNDERLINE_RE.match(lines[i + 1]) and re.search(
            r"\b(TargetID|BuddyGroupID|MirrorGroupID|Pool ID|NodeID)\b", line
        ):
            return 0.95
    if lines:
        named = sum(1 for ln in lines if _LISTNODE_RE.match(ln.strip()))
        if named and named == len(lines):
            return 0.8
        if named >= 2 and named >= len(lines) / 2:
            return 0.5
    return 0.0


def parse(text: str, **options: Any) -> ParseResult:
    """Parse BeeGFS topology output; ParseError when no listing is recognised."""
    return guard_parse(TOOL, _parse, text, options)


# --- value helpers ---------------------------------------------------------------------------


def _bytes(text: str) -> int | None:
    """'238.4GiB' / '5587.1GB' / '12345' -> bytes; '-' or '(n/a)' -> None."""
    text = text.strip()
    if text in ("", "-", "(n/a)", "n/a"):
        return None
    if text.isdigit():
        return int(text)
    m = _SIZE_RE.match(text)
    if not m:
        raise ParseError(f"not a size: {text!r}", tool=TOOL)
    # parse_size: "GiB" binary, "GB" decimal when default_binary is False.
    return parse_size(text, default_binary=False)


def _count(text: str) -> int | None:
    """'125.0M' / '66.1k' / '12.0' -> a plain count (SI prefixes are decimal)."""
    text = text.strip()
    if text in ("", "-", "(n/a)", "n/a"):
        return None
    m = _COUNT_RE.match(text)
    if not m:
        raise ParseError(f"not a count: {text!r}", tool=TOOL)
    power = "kmgtp".find(m.group(2).lower()) + 1 if m.group(2) else 0
    return int(round(float(m.group(1)) * 1000**power))


def _typed_id(text: str) -> tuple[str | None, int] | None:
    """'s:101' -> ('storage', 101); '7' -> (None, 7); anything else -> None."""
    m = re.fullmatch(r"(mg|[cms]):(\d+)", text.strip())
    if m:
        return _TYPE_PREFIX[m.group(1)], int(m.group(2))
    if text.strip().isdigit():
        return None, int(text.strip())
    return None


def _id_list(text: str) -> list[int]:
    """'s:101,s:102' / '2,4' -> [101, 102] / [2, 4]; '(none)' or '' -> []."""
    ids = []
    for part in re.split(r"[,\s]+", text.strip()):
        parsed = _typed_id(part) if part else None
        if parsed is not None:
            ids.append(parsed[1])
    return ids


def _state(text: str) -> str | None:
    text = text.strip()
    return text.lower() if text and text not in ("-", "(n/a)") else None


def _named(text: str) -> tuple[str | None, int | None]:
    """'node201 [ID: 201]' -> ('node201', 201)."""
    m = _NAMED_ID_RE.search(text)
    if m:
        return m.group(1), int(m.group(2))
    return None, None


def _with_pct(text: str) -> str:
    """'150.4MiB (1.25%)' -> '150.4MiB' (the percentage follows from the other columns)."""
    return re.sub(r"\s*\([\d.]+%\)\s*$", "", text.strip())


# --- tables ----------------------------------------------------------------------------------


def _v8_table(lines: list[str], start: int) -> tuple[list[str], list[dict[str, str]], int]:
    """Read a BeeGFS 8 table (left-aligned, columns start under their header words).

    Returns (headers, rows as header -> cell text, index after the table).
    """
    header = lines[start]
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    headers = [name.upper() for _, name in spans]
    starts = [pos for pos, _ in spans]
    rows: list[dict[str, str]] = []
    i = start + 1
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip() or line.lstrip().startswith(("#", "---")):
            break
        # Cells are sliced at the header positions; fall back to 2+ space splitting when a
        # value does not start where its header does.
        aligned = all(len(line) <= pos or line[pos - 1] == " " for pos in starts[1:])
        if aligned:
            cells = [
                line[pos : (starts[j + 1] if j + 1 < len(starts) else len(line))].strip()
                for j, pos in enumerate(starts)
            ]
        else:
            cells = re.split(r"\s{2,}", line.strip())
        cells += [""] * (len(headers) - len(cells))
        rows.append(dict(zip(headers, cells, strict=False)))
        i += 1
    return headers, rows, i


def _v7_header(line: str) -> list[str]:
    """v7 header words, with the two-word ones joined ("Cap. Pool", "Pool ID", ...)."""
    joined = (
        line.replace("Cap. Pool", "CapPool")
        .replace("Pool ID", "PoolID")
        .replace("Pool Description", "PoolDescription")
        .replace("Buddy Groups", "BuddyGroups")
    )
    return joined.split()


def _v7_cells(line: str) -> list[str]:
    """Whitespace split that keeps 'storage01 [ID: 1]' (--longnodes) as one cell."""
    line = _NAMED_ID_RE.sub(lambda m: f"{m.group(1)}\x00{m.group(2)}", line)
    return line.split()


_V7_TARGET_COLUMNS = {
    "targetid": "id",
    "nodeid": "node",
    "reachability": "reachability",
    "consistency": "consistency",
    "mirrorgroupid": "mirror_group",
    "mgmembertype": "mirror_role",
    "total": "total_bytes",
    "free": "free_bytes",
    "itotal": "inodes_total",
    "ifree": "inodes_free",
    "cappool": "cap_pool",
    "storagepoolid": "pool",
    "storagepool": "pool",
    "pool": "pool",
}


def _v7_target(
    headers: list[str], cells: list[str], df: bool, node_type: str | None
) -> dict[str, Any]:
    target: dict[str, Any] = {"id": None, "type": node_type}
    for header, cell in zip(headers, cells, strict=True):
        key = _V7_TARGET_COLUMNS.get(header.lower())
        if key == "pool" and df:
            key = "cap_pool"  # beegfs-df before "Cap. Pool": "Pool [normal]"
        if key is None:
            continue
        if key in ("id", "mirror_group"):
            target[key] = int(cell)
        elif key == "node":
            if "\x00" in cell:
                name, num = cell.split("\x00")
                target["node_name"], target["node_id"] = name, int(num)
            else:
                target["node_id"] = int(cell)
        elif key in ("reachability", "consistency", "mirror_role"):
            target[key] = _state(cell)
        elif key == "cap_pool":
            target[key] = _state(cell.strip("[]"))
        elif key == "pool":
            target["pool"] = int(cell) if cell.isdigit() else None
            if not cell.isdigit():
                target["pool_name"] = cell
        elif key in ("total_bytes", "free_bytes"):
            target[key] = _bytes(cell)
        elif key in ("inodes_total", "inodes_free"):
            target[key] = _count(cell)
    if target["id"] is None:
        raise ParseError("row without a target ID", tool=TOOL)
    if target.get("total_bytes") is not None and target.get("free_bytes") is not None:
        target["used_bytes"] = target["total_bytes"] - target["free_bytes"]
    if target.get("inodes_total") is not None and target.get("inodes_free") is not None:
        target["inodes_used"] = target["inodes_total"] - target["inodes_free"]
    return target


# --- the parser ------------------------------------------------------------------------------


def _empty_topology(kind: str, cli: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "cli": cli,
        "nodes": [],
        "targets": [],
        "pools": [],
        "mirror_groups": [],
    }


def _parse(text: str, options: dict[str, Any]) -> ParseResult:
    # Pasted output is often indented as a whole; v8 tables are found by a header at column 0.
    lines = split_lines(textwrap.dedent(text))
    node_type = options.get("node_type") or options.get("nodetype")
    if node_type is not None:
        node_type = NODE_TYPES.get(str(node_type).lower(), str(node_type).lower())
    nonblank = [(i, ln) for i, ln in enumerate(lines) if ln.strip()]
    first_idx, first = nonblank[0]

    if any(_MIGRATE_RE.match(ln) for _, ln in nonblank):
        topology = _parse_migrate(lines)
    elif any(re.match(r"^##\s+\w+ Targets\s*$", ln.strip()) for _, ln in nonblank):
        topology = _parse_v8_tables(lines, "df")
    elif _V8_HEADER_RE.match(first.strip()) and first == first.lstrip():
        topology = _parse_v8_tables(lines, None)
    elif any(ln.strip() in ("METADATA SERVERS:", "STORAGE TARGETS:") for _, ln in nonblank):
        topology = _parse_v7_df(lines)
    elif any(
        re.match(r"^\s*(EntryID|Entry type|Stripe pattern details)\s*:", ln) for _, ln in nonblank
    ):
        topology = _parse_retro_entries(lines)
    elif any(_V7_UNDERLINE_RE.match(ln) for _, ln in nonblank):
        topology = _parse_v7_tables(lines, node_type)
    elif any(_LISTNODE_RE.match(ln.strip()) for _, ln in nonblank):
        topology = _parse_listnodes(lines, node_type)
    else:
        raise ParseError(
            f"no BeeGFS listing recognised (line {first_idx + 1}: {first.strip()[:60]!r})",
            line=first_idx + 1,
            tool=TOOL,
        )

    if node_type:
        for item in topology["nodes"] + topology["targets"] + topology["mirror_groups"]:
            if item.get("type") is None:
                item["type"] = node_type
    result = ParseResult(tool=TOOL, extra={"topology": topology})
    return result.validate()


def _require(found: bool, message: str, line: int | None = None) -> None:
    if not found:
        raise ParseError(message, line=line, tool=TOOL)


def _parse_migrate(lines: list[str]) -> dict[str, Any]:
    topology = _empty_topology("migrate", "beegfs")
    for idx, line in enumerate(lines):
        m = _MIGRATE_RE.match(line)
        if not m:
            continue
        counters = {}
        for key, value in re.findall(r"(\w+):(-?\d+)", m.group(1)):
            counters[re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()] = int(value)
        _require(bool(counters), "the migrate Summary holds no counters", idx + 1)
        topology["migrate"] = counters
    return topology


def _parse_listnodes(lines: list[str], node_type: str | None) -> dict[str, Any]:
    topology = _empty_topology("nodes", "beegfs-ctl")
    warnings: list[str] = []
    node: dict[str, Any] | None = None
    for idx, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        if m := _LISTNODE_RE.match(line):
            node = {"id": int(m.group(2)), "type": node_type, "name": m.group(1)}
            topology["nodes"].append(node)
            continue
        if node is not None and raw[:1].isspace():
            # --details / --nicdetails lines under a node.
            if m := re.match(r"Ports:\s*UDP:\s*(\d+);\s*TCP:\s*(\d+)", line):
                node["ports"] = {"udp": int(m.group(1)), "tcp": int(m.group(2))}
            elif m := re.match(r"Interfaces:\s*(.*)$", line):
                node["interfaces"] = [
                    {"name": n, "type": t} for n, t in re.findall(r"(\S+?)\((\w+)\)", m.group(1))
                ]
            elif m := re.match(r"\+\s*(\S+?)\[ip addr:\s*([^;]+);\s*type:\s*(\w+)\]", line):
                node.setdefault("interfaces", []).append(
                    {"name": m.group(1), "ip": m.group(2).strip(), "type": m.group(3)}
                )
            continue
        # Footers: the count, and (metadata nodes) which one holds the root directory.
        if re.match(r"^(?:Number of nodes|Root):\s*\d+$", line):
            continue
        warnings.append(f"line {idx + 1}: {line[:80]}")
    _require(bool(topology["nodes"]), "no 'name [ID: n]' node lines found")
    if warnings:
        topology["warnings"] = warnings
    return topology


def _parse_v7_tables(lines: list[str], node_type: str | None) -> dict[str, Any]:
    """beegfs-ctl --listtargets (any columns), --listmirrorgroups, --liststoragepools."""
    topology = _empty_topology("targets", "beegfs-ctl")
    warnings: list[str] = []
    kind: str | None = None
    headers: list[str] = []
    header_line: int | None = None
    header_rows = {i - 1 for i, ln in enumerate(lines) if i and _V7_UNDERLINE_RE.match(ln)}
    for idx, raw in enumerate(lines):
        line = raw.rstrip()
        if not line.strip() or idx in header_rows:
            continue
        if _V7_UNDERLINE_RE.match(line):
            if idx == 0:
                continue
            headers = _v7_header(lines[idx - 1])
            header_line = idx
            lower = [h.lower() for h in headers]
            if "buddygroupid" in lower:
                kind = "mirror_groups"
            elif "poolid" in lower:
                kind = "pools"
            elif "targetid" in lower:
                kind = "targets"
            else:
                raise ParseError(
                    f"unknown beegfs-ctl table header {lines[idx - 1].strip()!r}",
                    line=idx,
                    tool=TOOL,
                )
            continue
        if kind is None:
            continue
        cells = _v7_cells(line)
        try:
            if kind == "pools":
                _require(len(cells) >= 2 and cells[0].isdigit(), "bad pool row")
                topology["pools"].append(
                    {
                        "id": int(cells[0]),
                        "name": cells[1],
                        "targets": _id_list(cells[2]) if len(cells) > 2 else [],
                        "mirror_groups": _id_list(cells[3]) if len(cells) > 3 else [],
                    }
                )
                continue
            _require(len(cells) == len(headers), "cell count differs from the header")
            if kind == "mirror_groups":
                row = {h.lower(): int(c) for h, c in zip(headers, cells, strict=True)}
                group_type = (
                    "meta"
                    if "primarynodeid" in row
                    else "storage"
                    if "primarytargetid" in row
                    else node_type
                )
                topology["mirror_groups"].append(
                    {
                        "id": row["buddygroupid"],
                        "type": group_type,
                        "primary": row.get("primarynodeid", row.get("primarytargetid")),
                        "secondary": row.get("secondarynodeid", row.get("secondarytargetid")),
                    }
                )
            else:
                topology["targets"].append(_v7_target(headers, cells, False, node_type))
        except (ParseError, ValueError, KeyError):
            warnings.append(f"line {idx + 1}: unreadable row {line.strip()[:80]!r}")
    _require(kind is not None, "no beegfs-ctl table header with a '====' underline found")
    topology["kind"] = kind
    found = topology[kind] if kind in ("pools", "mirror_groups") else topology["targets"]
    _require(
        bool(found), f"the beegfs-ctl table at line {header_line} has no readable rows", header_line
    )
    # --listtargets --mirrorgroups: rebuild the groups from their member rows.
    groups: dict[int, dict[str, Any]] = {}
    for target in topology["targets"]:
        if target.get("mirror_group") is None or target.get("mirror_role") is None:
            continue
        group = groups.setdefault(
            target["mirror_group"], {"id": target["mirror_group"], "type": node_type}
        )
        role = target["mirror_role"]
        group[role] = target["id"]
        if target.get("node_id") is not None:
            group[f"{role}_node_id"] = target["node_id"]
    if groups:
        topology["mirror_groups"] = list(groups.values())
    if warnings:
        topology["warnings"] = warnings
    return topology


def _parse_v7_df(lines: list[str]) -> dict[str, Any]:
    topology = _empty_topology("df", "beegfs-df")
    warnings: list[str] = []
    section: str | None = None
    headers: list[str] = []
    for idx, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        if line == "METADATA SERVERS:":
            section, headers = "meta", []
            continue
        if line == "STORAGE TARGETS:":
            section, headers = "storage", []
            continue
        if section is None or _V7_UNDERLINE_RE.match(raw):
            continue
        if line.startswith("TargetID"):
            headers = _v7_header(line)
            continue
        if not headers:
            continue
        cells = _v7_cells(line)
        try:
            _require(len(cells) == len(headers), "cell count differs from the header")
            topology["targets"].append(_v7_target(headers, cells, True, section))
        except (ParseError, ValueError):
            warnings.append(f"line {idx + 1}: unreadable row {line[:80]!r}")
    _require(bool(topology["targets"]), "no beegfs-df target rows found")
    if warnings:
        topology["warnings"] = warnings
    return topology


def _v8_target(row: dict[str, str], section_type: str | None) -> dict[str, Any]:
    target: dict[str, Any] = {"id": None, "type": section_type}
    for header, cell in row.items():
        h = header.replace(" ", "_")
        if h == "ID":
            parsed = _typed_id(cell)
            _require(parsed is not None, f"not a target ID: {cell!r}")
            assert parsed is not None
            target["type"] = parsed[0] or target["type"]
            target["id"] = parsed[1]
        elif h == "UID":
            target["uid"] = int(cell) if cell.isdigit() else cell
        elif h == "TYPE":
            target["type"] = NODE_TYPES.get(cell.lower(), cell.lower() or None)
        elif h == "ALIAS":
            target["name"] = cell or None
        elif h in ("NODE", "ON_NODE"):
            parsed = _typed_id(cell)
            if parsed is not None:
                target["node_id"] = parsed[1]
            elif cell:
                name, num = _named(cell)
                target["node_name"], target["node_id"] = (name, num) if name else (cell, None)
        elif h in ("STORAGE_POOL", "POOL"):
            target.update(_pool_cell(cell))
        elif h == "REACHABILITY":
            target["reachability"] = _state(cell)
        elif h == "CONSISTENCY":
            target["consistency"] = _state(cell)
        elif h == "LAST_CONTACT":
            m = re.match(r"(\d+)s ago", cell)
            target["last_contact_s"] = int(m.group(1)) if m else None
        elif h in ("CAP_POOL", "CAPACITY_POOL"):
            target["cap_pool"] = _state(cell)
        elif h == "SPACE":
            target["total_bytes"] = _bytes(cell)
        elif h in ("SPACE_USED", "SUSED"):
            target["used_bytes"] = _bytes(_with_pct(cell))
        elif h in ("SPACE_FREE", "SFREE"):
            target["free_bytes"] = _bytes(cell)
        elif h == "INODES":
            target["inodes_total"] = _count(cell)
        elif h in ("INODES_USED", "IUSED"):
            target["inodes_used"] = _count(_with_pct(cell))
        elif h in ("INODES_FREE", "IFREE"):
            target["inodes_free"] = _count(cell)
    _require(target["id"] is not None, "row without a target ID")
    return target


def _pool_cell(cell: str) -> dict[str, Any]:
    """'s:1' / 'archive (2)' / 'storage_pool_default' / '(n/a)' -> pool and pool_name."""
    cell = cell.strip()
    if cell in ("", "(n/a)", "n/a", "(file)", "(directory)"):
        return {"pool": None}
    parsed = _typed_id(cell)
    if parsed is not None:
        return {"pool": parsed[1]}
    m = re.fullmatch(r"(.+?)\s*\((\d+)\)", cell)
    if m:
        return {"pool": int(m.group(2)), "pool_name": m.group(1)}
    return {"pool": None, "pool_name": cell}


def _v8_entry(row: dict[str, str]) -> dict[str, Any]:
    entry = _blank_entry()
    entry["path"] = row.get("PATH") or None
    entry["entry_id"] = row.get("ENTRY_ID") or None
    entry["entry_type"] = row.get("TYPE") or None
    meta = _typed_id(row.get("META_NODE", ""))
    entry["meta_node_id"] = meta[1] if meta else None
    mirror = _typed_id(row.get("META_MIRROR", ""))
    entry["meta_mirror_group"] = mirror[1] if mirror else None
    pool = _pool_cell(row.get("STORAGE_POOL", ""))
    entry["pool"], entry["pool_name"] = pool.get("pool"), pool.get("pool_name")
    m = re.fullmatch(r"(.+?)\s*\((\d+)x(\S+)\)", row.get("STRIPE_PATTERN", "").strip())
    if m:
        entry["pattern"] = m.group(1)
        entry["num_targets"] = int(m.group(2))
        entry["chunk_size"] = (
            parse_size(m.group(3)) if not m.group(3).isdigit() else int(m.group(3))
        )
    entry["storage_targets"] = _id_list(row.get("STORAGE_TARGETS", ""))
    entry["storage_mirror_groups"] = _id_list(row.get("STORAGE_MIRRORS", ""))
    remote = row.get("REMOTE_TARGETS", "").strip()
    entry["remote_targets"] = [] if remote in ("", "(none)") else remote.split(",")
    sessions = re.match(r"Reading:\s*(\d+),\s*Writing:\s*(\d+)", row.get("CLIENT_SESSIONS", ""))
    if sessions:
        entry["client_sessions"] = {
            "reading": int(sessions.group(1)),
            "writing": int(sessions.group(2)),
        }
    if entry["entry_id"] is None:
        raise ParseError("entry row without an ENTRY_ID", tool=TOOL)
    return entry


def _parse_v8_tables(lines: list[str], kind: str | None) -> dict[str, Any]:
    """BeeGFS 8 tables: node list, target list, pool list, entry info, health df."""
    topology = _empty_topology(kind or "targets", "beegfs")
    warnings: list[str] = []
    section_type: str | None = None
    seen_table = False
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        stripped = line.strip()
        if m := re.match(r"^##\s+(\w+) Targets\s*$", stripped):
            section_type = NODE_TYPES.get(m.group(1).lower())
            i += 1
            continue
        if not (_V8_HEADER_RE.match(stripped) and line == line.lstrip()):
            i += 1
            continue
        headers, rows, i = _v8_table(lines, i)
        seen_table = True
        table_kind = kind or _v8_kind(headers)
        topology["kind"] = table_kind
        for n, row in enumerate(rows):
            try:
                if table_kind == "entry_info":
                    topology.setdefault("entries", []).append(_v8_entry(row))
                elif table_kind == "pools":
                    parsed = _typed_id(row.get("ID", ""))
                    _require(parsed is not None, "pool row without an ID")
                    assert parsed is not None
                    topology["pools"].append(
                        {
                            "id": parsed[1],
                            "name": row.get("ALIAS") or None,
                            "targets": _id_list(row.get("TARGETS", "")),
                            "mirror_groups": _id_list(row.get("MIRRORS", "")),
                        }
                    )
                elif table_kind == "nodes":
                    parsed = _typed_id(row.get("ID", ""))
                    _require(parsed is not None, "node row without an ID")
                    assert parsed is not None
                    node_type = NODE_TYPES.get(row.get("TYPE", "").lower(), parsed[0])
                    topology["nodes"].append(
                        {"id": parsed[1], "type": node_type, "name": row.get("ALIAS") or None}
                    )
                else:
                    topology["targets"].append(_v8_target(row, section_type))
            except (ParseError, ValueError):
                warnings.append(f"table row {n + 1}: unreadable {' '.join(row.values())[:80]!r}")
    _require(seen_table, "no BeeGFS 8 table header ('ID  TYPE  ALIAS …') found")
    if topology["kind"] == "entry_info":
        entries = topology.get("entries", [])
        _require(bool(entries), "the entry info table has no readable rows")
        topology["entry"] = entries[0]
        for entry in entries:
            for tid in entry["storage_targets"]:
                if all(t["id"] != tid for t in topology["targets"]):
                    topology["targets"].append({"id": tid, "type": "storage"})
    else:
        key = {"pools": "pools", "nodes": "nodes"}.get(topology["kind"], "targets")
        _require(bool(topology[key]), f"the BeeGFS 8 {topology['kind']} table has no readable rows")
    if warnings:
        topology["warnings"] = warnings
    return topology


def _v8_kind(headers: list[str]) -> str:
    names = set(headers)
    if "ENTRY_ID" in names:
        return "entry_info"
    if "TARGETS" in names or "MIRRORS" in names:
        return "pools"
    if names & {"NODE", "ON NODE", "STORAGE_POOL", "POOL", "SPACE", "REACHABILITY"}:
        return "targets"
    if names <= {"ID", "UID", "TYPE", "ALIAS", "NICS", "PORT", "BEEMSG_PORT", "GRPC_PORT"}:
        return "nodes"
    raise ParseError(f"unknown BeeGFS 8 table with columns {', '.join(headers)}", tool=TOOL)


def _blank_entry() -> dict[str, Any]:
    return {
        "path": None,
        "entry_id": None,
        "entry_type": None,
        "meta_node_id": None,
        "meta_node_name": None,
        "meta_mirror_group": None,
        "pattern": None,
        "chunk_size": None,
        "num_targets": None,
        "actual_targets": None,
        "pool": None,
        "pool_name": None,
        "storage_targets": [],
        "storage_mirror_groups": [],
        "remote_targets": [],
    }


def _parse_retro_entries(lines: list[str]) -> dict[str, Any]:
    """beegfs-ctl --getentryinfo (7.x) and `beegfs entry info --retro` (8.x)."""
    topology = _empty_topology("entry_info", "beegfs-ctl")
    entries: list[dict[str, Any]] = []
    entry: dict[str, Any] | None = None
    block: str | None = None  # sub-list currently being read
    section: str | None = None  # "dentry" / "inode" blocks of --verbose

    def new_entry() -> dict[str, Any]:
        fresh = _blank_entry()
        entries.append(fresh)
        return fresh

    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        body = line.lstrip("+ ").strip()
        key, _, value = body.partition(":")
        key, value = key.strip().lower(), value.strip()
        starts_entry = key in ("path", "entry type", "entryid") and not line.startswith("+")
        if starts_entry and (entry is None or entry.get(_ENTRY_KEYS[key]) is not None):
            entry, block, section = new_entry(), None, None
        if entry is None:
            entry = new_entry()
        if not line.startswith("+"):
            block = None
        if key == "path" and line.startswith("+") and section:
            entry[f"{section}_path"] = value
        elif key == "path":
            entry["path"] = value
        elif key == "entry type":
            entry["entry_type"] = value
        elif key == "entryid":
            entry["entry_id"] = value
        elif key == "parentid":
            entry["parent_id"] = value
        elif key in ("metadata node", "current primary metadata node"):
            name, num = _named(value)
            if section:
                entry[f"{section}_meta_node_name"], entry[f"{section}_meta_node_id"] = name, num
            else:
                entry["meta_node_name"], entry["meta_node_id"] = name, num
        elif key == "metadata buddy group":
            target_key = f"{section}_meta_mirror_group" if section else "meta_mirror_group"
            entry[target_key] = int(value)
        elif key == "type" and line.startswith("+"):
            entry["pattern"] = value
        elif key == "chunksize":
            entry["chunk_size"] = int(value) if value.isdigit() else parse_size(value)
        elif key == "number of storage targets":
            desired = re.search(r"desired:\s*(\d+)", value)
            actual = re.search(r"actual:\s*(\d+)", value)
            entry["num_targets"] = int(desired.group(1)) if desired else None
            entry["actual_targets"] = int(actual.group(1)) if actual else None
        elif key == "storage pool":
            m = re.match(r"(\d+)\s*(?:\((.*)\))?", value)
            if m:
                entry["pool"], entry["pool_name"] = int(m.group(1)), m.group(2)
        elif key == "storage targets" and not value:
            block = "targets"
        elif key == "storage mirror buddy groups" and not value:
            block = "mirrors"
        elif key == "remote storage targets" and not value:
            block = "remote"
        elif block == "targets" and (m := re.match(r"\+\s*(\d+)\s*@\s*(.*)$", line)):
            name, num = _named(m.group(2))
            tid = int(m.group(1))
            entry["storage_targets"].append(tid)
            topology["targets"].append(
                {"id": tid, "type": "storage", "node_id": num, "node_name": name}
            )
        elif block == "mirrors" and (m := re.match(r"\+\s*(\d+)\s*$", line)):
            entry["storage_mirror_groups"].append(int(m.group(1)))
        elif block == "remote" and line.startswith("+"):
            entry["remote_targets"].append(body)
        elif key == "chunk path":
            entry["chunk_path"] = value
        elif key == "inlined inode":
            entry["inlined_inode"] = value.lower() == "yes"
        elif key == "file state":
            entry["file_state"] = value
        elif key in ("dentry info", "inode info"):
            section = key.split()[0]
        elif key == "client sessions":
            entry["client_sessions"] = {}
            block = "sessions"
        elif block == "sessions" and key in ("reading", "writing") and value.isdigit():
            entry["client_sessions"][key] = int(value)
        elif key == "cooldown":
            entry["cool_down_s"] = int(value) if value.isdigit() else value
    entries = [e for e in entries if e["entry_id"] is not None or e["pattern"] is not None]
    _require(bool(entries), "no 'EntryID:' or 'Stripe pattern details:' block found")
    for e in entries:
        if e["meta_node_id"] is None and e.get("inlined_inode") and "dentry_meta_node_id" in e:
            # An inlined inode lives with its dentry, so the dentry's owner is the entry's.
            e["meta_node_id"] = e["dentry_meta_node_id"]
            e["meta_node_name"] = e.get("dentry_meta_node_name")
        if e["meta_node_id"] is None and "inode_meta_node_id" in e:
            e["meta_node_id"] = e["inode_meta_node_id"]
            e["meta_node_name"] = e.get("inode_meta_node_name")
    topology["entry"] = entries[0]
    topology["entries"] = entries
    return topology


_ENTRY_KEYS = {"path": "path", "entry type": "entry_type", "entryid": "entry_id"}
