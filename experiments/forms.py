"""Forms for inventory and tuning sets; tuning parameters are entered as BeeGFS .conf text."""

from __future__ import annotations

from django import forms
from django.db.models import Case, Q, Value, When

from experiments.models import (
    Drive,
    HardwareProfile,
    Nic,
    Node,
    StoragePool,
    Target,
    Testbed,
    TestbedNode,
    TuningSet,
)
from experiments.results.importing import binary_problem
from experiments.shared.tuning_keys import SCOPES, check_conf, format_conf
from experiments.shared.validators import work_path_problem


def visible(model, user):
    """Objects a user may pick in a form: published ones and the lab's own."""
    return model.objects.all() if user.is_authenticated else model.objects.none()


class HardwareProfileForm(forms.ModelForm):
    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)

    class Meta:
        model = HardwareProfile
        fields = [
            "name",
            "vendor",
            "model",
            "architecture",
            "cpu_model",
            "sockets",
            "cores_per_socket",
            "threads_per_core",
            "clock_ghz",
            "numa_domains",
            "memory_gib",
            "memory_channels",
            "dimm_type",
            "raid_controller",
            "tdp_watts",
            "notes",
        ]
        widgets = {"notes": forms.Textarea(attrs={"rows": 3})}


class DriveForm(forms.ModelForm):
    class Meta:
        model = Drive
        fields = [
            "kind",
            "model",
            "count",
            "capacity_gb",
            "interface",
            "pcie_gen",
            "pcie_lanes",
            "seq_read_mbps",
            "seq_write_mbps",
            "rand_read_iops",
            "rand_write_iops",
            "purpose",
        ]

    def __init__(self, *args, parent=None, user=None, **kwargs):
        super().__init__(*args, **kwargs)

    def clean(self):
        data = super().clean()
        pcie_known = data.get("pcie_gen") and data.get("pcie_lanes")
        if data.get("interface") == "pcie" and not pcie_known:
            self.add_error("pcie_lanes", "PCIe drives need a generation and a lane count.")
        return data


class NicForm(forms.ModelForm):
    class Meta:
        model = Nic
        fields = [
            "kind",
            "model",
            "rate_gbps",
            "ports",
            "count",
            "usable_gbytes",
            "usable_source",
        ]

    def __init__(self, *args, parent=None, user=None, **kwargs):
        super().__init__(*args, **kwargs)


class NodeForm(forms.ModelForm):
    class Meta:
        model = Node
        fields = ["hostname", "profile", "address", "os", "kernel", "notes", "shared"]
        widgets = {"notes": forms.Textarea(attrs={"rows": 3})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["profile"].queryset = visible(HardwareProfile, user)

    def clean_hostname(self):
        hostname = self.cleaned_data["hostname"].strip()
        clash = Node.objects.filter(owner=self.user, hostname=hostname).exclude(pk=self.instance.pk)
        if self.user is not None and clash.exists():
            raise forms.ValidationError("You already have a node with this hostname.")
        return hostname


class TestbedForm(forms.ModelForm):
    class Meta:
        model = Testbed
        fields = [
            "name",
            "description",
            "beegfs_version",
            "fabric",
            "switch",
            "network_notes",
            "benchmark_dir",
            "independent_storage",
            "slurm_partition",
            "slurm_account",
        ]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "network_notes": forms.Textarea(attrs={"rows": 2}),
        }

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)

    def clean_benchmark_dir(self):
        path = self.cleaned_data["benchmark_dir"].strip()
        problem = work_path_problem(path) if path else None
        if problem:
            raise forms.ValidationError(problem)
        return path


class OperatorForm(forms.Form):
    """Grant or revoke a testbed's operator rights for a user (by username) or a group (by
    name)."""

    kind = forms.ChoiceField(choices=[("user", "user"), ("group", "group")])
    action = forms.ChoiceField(choices=[("add", "add"), ("remove", "remove")])
    name = forms.CharField(max_length=150, label="username or group name")

    def __init__(self, *args, testbed: Testbed, **kwargs):
        super().__init__(*args, **kwargs)
        self.testbed = testbed

    def clean(self):
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        data = super().clean()
        kind, name = data.get("kind"), (data.get("name") or "").strip()
        if not kind or not name:
            return data
        if kind == "user":
            found = get_user_model().objects.filter(username=name).first()
            if found is None:
                raise forms.ValidationError(f"There is no user {name!r}.")
            if data.get("action") == "add" and found.pk == self.testbed.owner_id:
                raise forms.ValidationError(f"{name} owns the testbed and operates it already.")
        else:
            found = Group.objects.filter(name=name).first()
            if found is None:
                raise forms.ValidationError(f"There is no group {name!r}.")
        data["found"] = found
        return data

    def apply(self) -> str:
        data = self.cleaned_data
        related = self.testbed.operators if data["kind"] == "user" else self.testbed.operator_groups
        found = data["found"]
        what = f"{data['kind']} {found}"
        if data["action"] == "add":
            related.add(found)
            return f"The {what} now operates {self.testbed}."
        related.remove(found)
        return f"The {what} no longer operates {self.testbed}."


def node_choice_label(node: Node) -> str:
    """A node as a choice: host names repeat across owners (a published node and one's own
    node of the same machine), so the owner tells them apart."""
    if node.published:
        return f"{node.hostname} (published)"
    return f"{node.hostname} ({node.owner.username if node.owner else 'no owner'})"


def node_choices(testbed: Testbed | None, user, current: int | None = None):
    """The nodes that may join ``testbed`` (``Testbed.may_use_node``), the user's own first,
    then the testbed owner's, then shared ones, each by host name; published nodes never
    (and ``current``, a member's present node, always)."""
    nodes = visible(Node, user).filter(published=False)
    if testbed is not None and not (user is not None and user.is_staff):
        nodes = nodes.filter(Q(owner_id=testbed.owner_id) | Q(shared=True))
    if current is not None:
        nodes = nodes | Node.objects.filter(pk=current)
    mine = getattr(user, "pk", None)
    order = Case(
        When(owner_id=mine, then=Value(0)),
        When(owner_id=getattr(testbed, "owner_id", None), then=Value(1)),
        default=Value(2),
    )
    return nodes.select_related("profile", "owner").order_by(order, "hostname", "pk")


class TestbedNodeForm(forms.ModelForm):
    class Meta:
        model = TestbedNode
        fields = [
            "node",
            "management",
            "metadata",
            "storage",
            "client",
            "monitoring",
            "storage_links",
        ]

    def __init__(self, *args, parent: Testbed | None = None, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.parent = parent
        self.user = user
        field = self.fields["node"]
        # Any node is looked up (so that a refused one is refused with its reason,
        # Testbed.node_refused); only those that may join are offered, one's own first.
        field.queryset = visible(Node, user).select_related("profile", "owner")
        field.label_from_instance = node_choice_label
        field.widget.choices = [("", field.empty_label)] + [
            (n.pk, node_choice_label(n)) for n in node_choices(parent, user, self.instance.node_id)
        ]
        self.fields["node"].help_text = "Your own nodes, or a node its owner shares."

    def clean_node(self):
        node = self.cleaned_data["node"]
        if self.parent is not None and node.pk != self.instance.node_id:
            problem = self.parent.node_refused(node, self.user)
            if problem:
                raise forms.ValidationError(f"{problem}.")
        return node

    def clean(self):
        data = super().clean()
        if not any(data.get(role) for role in TestbedNode.ROLES):
            raise forms.ValidationError("Give the node at least one role.")
        node = data.get("node")
        if node and self.parent:
            problem = self.parent.member_clash(node, exclude_pk=self.instance.pk)
            if problem:
                self.add_error("node", problem)
        return data


class TargetForm(forms.ModelForm):
    class Meta:
        model = Target
        fields = [
            "kind",
            "node",
            "target_id",
            "name",
            "count",
            "numa_domain",
            "raid_level",
            "disks",
            "drive",
            "filesystem",
            "mount_options",
            "path",
            "capacity_gb",
            "pool",
        ]

    def __init__(self, *args, parent: Testbed | None = None, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.parent = parent
        self.user = user
        if parent is not None:
            member_nodes = Node.objects.filter(memberships__testbed=parent)
            self.fields["node"].queryset = member_nodes
            self.fields["drive"].queryset = Drive.objects.filter(
                profile__nodes__in=member_nodes
            ).distinct()
            self.fields["pool"].queryset = parent.pools.all()

    def clean_node(self):
        node = self.cleaned_data.get("node")
        if node is not None and self.parent is not None and node.pk != self.instance.node_id:
            problem = self.parent.node_refused(node, self.user)
            if problem:
                raise forms.ValidationError(f"{problem}.")
        return node

    def clean(self):
        data = super().clean()
        level, disks = data.get("raid_level"), data.get("disks")
        minimum = {"1": 2, "5": 3, "6": 4, "10": 4}.get(level or "")
        if minimum and disks and disks < minimum:
            self.add_error("disks", f"RAID{level} needs at least {minimum} disks.")
        if level == "10" and disks and disks % 2:
            self.add_error("disks", "RAID10 needs an even number of disks.")
        if level == "none" and disks and disks != 1:
            self.add_error("disks", "A target without RAID has one disk.")
        return data


class StoragePoolForm(forms.ModelForm):
    class Meta:
        model = StoragePool
        fields = ["pool_id", "name"]

    def __init__(self, *args, parent: Testbed | None = None, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.parent = parent

    def clean_pool_id(self):
        pool_id = self.cleaned_data["pool_id"]
        if (
            self.parent
            and self.parent.pools.filter(pool_id=pool_id).exclude(pk=self.instance.pk).exists()
        ):
            raise forms.ValidationError("This testbed already has a pool with this ID.")
        return pool_id


def _scope_field(label: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        widget=forms.Textarea(
            attrs={"rows": 4, "class": "conf", "spellcheck": "false", "placeholder": "key = value"}
        ),
    )


class TuningSetForm(forms.ModelForm):
    """Name, parent and one ``key = value`` text box per scope."""

    class Meta:
        model = TuningSet
        fields = ["name", "description", "parent"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        parents = visible(TuningSet, user)
        if self.instance.pk:
            # A set can not inherit from itself or its descendants.
            excluded = {self.instance.pk, *self._descendant_ids(self.instance)}
            parents = parents.exclude(pk__in=excluded)
        self.fields["parent"].queryset = parents
        for scope, label in SCOPES:
            self.fields[f"scope_{scope}"] = _scope_field(label)
            if self.instance.pk and not self.is_bound:
                own = [(p.key, p.value) for p in self.instance.params.filter(scope=scope)]
                self.initial[f"scope_{scope}"] = format_conf(own)

    @staticmethod
    def _descendant_ids(tuning_set: TuningSet) -> set[int]:
        found: set[int] = set()
        frontier = [tuning_set.pk]
        while frontier:
            children = list(
                TuningSet.objects.filter(parent__in=frontier)
                .exclude(pk__in=found)
                .values_list("pk", flat=True)
            )
            found.update(children)
            frontier = children
        return found

    def clean(self):
        data = super().clean()
        entries: list[tuple[str, str, str]] = []
        unknown: list[str] = []
        for scope, _ in SCOPES:
            field = f"scope_{scope}"
            found, unknown_keys, errors = check_conf(scope, data.get(field) or "")
            for message in errors:
                self.add_error(field, message)
            unknown += [f"{scope}.{key}" for key in unknown_keys]
            entries += [(scope, key, value) for key, value in found]
        self.entries = entries
        self.unknown_keys = unknown
        return data


class ConfImportForm(forms.Form):
    """Import a BeeGFS .conf file (or pasted text) into one scope of a tuning set."""

    scope = forms.ChoiceField(choices=SCOPES)
    conf_file = forms.FileField(required=False, label=".conf file")
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}))

    def clean(self):
        data = super().clean()
        upload = data.get("conf_file")
        text = data.get("text") or ""
        if upload:
            if upload.size > 1_000_000:
                raise forms.ValidationError("The file is larger than 1 MB.")
            raw = upload.read()
            problem = binary_problem(raw)
            if problem:
                raise forms.ValidationError(f"{upload.name} {problem}.")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError(f"{upload.name} is not UTF-8 text.") from None
        if not text.strip():
            raise forms.ValidationError("Choose a file or paste its text.")
        if "scope" not in data:
            return data  # the scope's own error says why
        entries, _, errors = check_conf(data["scope"], text)
        if errors:
            raise forms.ValidationError(errors)
        data["entries"] = entries
        return data


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    """Upload files or paste text of existing benchmark output for one testbed."""

    testbed = forms.ModelChoiceField(queryset=Testbed.objects.all(), to_field_name="uuid")
    tuning_set = forms.ModelChoiceField(
        queryset=TuningSet.objects.all(), required=False, to_field_name="uuid"
    )
    tool = forms.ChoiceField(required=False, choices=[("", "detect from the output")])
    op = forms.ChoiceField(
        required=False,
        label="direction (dd)",
        choices=[("", "as the output says"), ("write", "write"), ("read", "read")],
    )
    label = forms.CharField(required=False, max_length=200)
    files = MultipleFileField(required=False, label="output files")
    text = forms.CharField(
        required=False,
        label="or paste output",
        widget=forms.Textarea(attrs={"rows": 8, "class": "conf"}),
    )
    telemetry = forms.FileField(
        required=False,
        label="telemetry (JSON, one output only)",
        help_text="beeweb-telemetry/1 documents of the run's nodes (docs/telemetry.md).",
    )

    def __init__(self, *args, user=None, **kwargs):
        from runners import registry

        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["tool"].choices += [(t.name, t.label) for t in registry.parsed()]
        if user is not None:
            # Offered: the testbeds the user operates. Accepted: any, so that another one gets
            # a message saying why (clean_testbed) instead of "not a valid choice".
            offered = Testbed.objects.operable_by(user).order_by("name", "pk")
            self.fields["testbed"].choices = [("", "---------")] + [
                (t.uuid, str(t)) for t in offered
            ]
            self.fields["testbed"].help_text = "Testbeds you operate (published ones take no runs)."

    def clean_testbed(self):
        testbed = self.cleaned_data["testbed"]
        problem = testbed.runs_refused(self.user) if self.user is not None else None
        if problem:
            raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return testbed

    def clean(self):
        from experiments.results.importing import MAX_IMPORT_BYTES, binary_problem, item_problem

        data = super().clean()
        items: list[tuple[str, str]] = []
        problems: list[str] = []
        for upload in data.get("files") or []:
            if upload.size > MAX_IMPORT_BYTES:
                problems.append(f"{upload.name} is larger than 20 MiB.")
                continue
            raw = upload.read()
            problem = binary_problem(raw)
            if problem:
                problems.append(f"{upload.name} {problem}.")
                continue
            items.append((upload.name, raw.decode("utf-8", errors="replace")))
        if (data.get("text") or "").strip():
            items.append((data.get("label") or "pasted output", data["text"]))
        if not items and not problems:
            raise forms.ValidationError("Choose output files or paste output.")
        problems += [f"{name}: {p}" for name, text in items if (p := item_problem(name, text))]
        data["telemetry_json"] = ""
        upload = data.get("telemetry")
        if upload:
            from experiments.results.importing import read_telemetry

            if len(items) > 1:
                problems.append("Telemetry belongs to one run: import one output with it.")
            else:
                try:
                    data["telemetry_json"] = read_telemetry(upload.read(MAX_IMPORT_BYTES + 1))
                except ValueError as exc:
                    problems.append(f"{upload.name}: {exc}")
        if problems:
            raise forms.ValidationError(["Nothing was imported.", *problems])
        data["items"] = items
        return data


class TopologyImportForm(forms.Form):
    """Paste (or upload) BeeGFS CLI output to fill a testbed's nodes, targets and pools."""

    BOXES = 4  # outputs that need different node types each get a box

    profile = forms.ModelChoiceField(
        queryset=HardwareProfile.objects.none(),
        required=False,
        to_field_name="uuid",
        label="hardware profile of new nodes",
        empty_label="“Unknown (imported from BeeGFS)”, to fix later",
    )
    files = MultipleFileField(required=False, label="output files")
    files_node_type = forms.ChoiceField(required=False, label="node type of the files")

    def __init__(self, *args, user=None, **kwargs):
        from experiments.inventory.topology import NODE_TYPE_CHOICES

        super().__init__(*args, **kwargs)
        self.fields["profile"].queryset = visible(HardwareProfile, user)
        self.fields["files_node_type"].choices = NODE_TYPE_CHOICES
        for n in range(1, self.BOXES + 1):
            self.fields[f"text_{n}"] = forms.CharField(
                required=False,
                label=f"output {n}",
                strip=False,
                widget=forms.Textarea(attrs={"rows": 6, "class": "conf", "spellcheck": "false"}),
            )
            self.fields[f"node_type_{n}"] = forms.ChoiceField(
                required=False, choices=NODE_TYPE_CHOICES, label=f"node type of output {n}"
            )

    def boxes(self):
        """(text field, node type field) per box, for the template."""
        return [(self[f"text_{n}"], self[f"node_type_{n}"]) for n in range(1, self.BOXES + 1)]

    def clean(self):
        from experiments.inventory.topology import MAX_TOPOLOGY_BYTES

        data = super().clean()
        # (field the text came from, label, text, node type): errors go back to that field.
        items: list[tuple[str, str, str, str]] = []
        for n in range(1, self.BOXES + 1):
            text = data.get(f"text_{n}") or ""
            if text.strip():
                if len(text.encode()) > MAX_TOPOLOGY_BYTES:
                    self.add_error(f"text_{n}", "The output is larger than 2 MiB.")
                    continue
                items.append((f"text_{n}", f"Output {n}", text, data.get(f"node_type_{n}", "")))
        for upload in data.get("files") or []:
            if upload.size > MAX_TOPOLOGY_BYTES:
                self.add_error("files", f"{upload.name} is larger than 2 MiB.")
                continue
            raw = upload.read()
            problem = binary_problem(raw)
            if problem:
                self.add_error("files", f"{upload.name} {problem}.")
                continue
            text = raw.decode("utf-8", errors="replace")
            items.append(("files", upload.name, text, data.get("files_node_type", "")))
        if not items and not self.errors:
            raise forms.ValidationError("Paste BeeGFS output or choose output files.")
        data["items"] = items
        return data
