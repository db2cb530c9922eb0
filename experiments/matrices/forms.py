"""Forms of the matrix pages: the matrix as a form (parameters and axes as short text) and
YAML import."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from experiments.matrices.files import MAX_YAML_BYTES, too_large
from experiments.matrices.rules import FACT_NAMES
from experiments.matrices.validation import MatrixInvalid, validate_matrix
from experiments.models import Matrix, RunOrder, Testbed, TuningSet
from runners.tools import ADAPTERS

_RANGE_RE = re.compile(
    r"^(pow2|linear)\(\s*(\d+)\s*(?:\.\.|,)\s*(\d+)\s*(?:(?:,|step)\s*(\d+)\s*)?\)$"
)

_RANGE_START_RE = re.compile(r"^(pow2|linear)\(", re.IGNORECASE)


def scalar(text: str) -> Any:
    """A value as typed: whole numbers become ints, true/false booleans, the rest text."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def parse_lines(text: str) -> tuple[list[tuple[int, str, str]], list[str]]:
    """(line number, name, value) of each ``name = value`` line, and a message for every
    line that is not one (all of them, not the first only)."""
    triples, errors = [], []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            errors.append(f"line {number}: expected 'name = value', got {line[:80]!r}")
            continue
        triples.append((number, key.strip(), value.strip()))
    return triples, errors


def format_params(params: dict[str, Any]) -> str:
    return "\n".join(f"{k} = {_show(v)}" for k, v in params.items())


def format_axes(axes: list[dict[str, Any]]) -> str:
    lines = []
    for axis in axes:
        if "values" in axis:
            lines.append(f"{axis['param']} = {', '.join(_show(v) for v in axis['values'])}")
        else:
            spec = axis["range"]
            step = f", {spec['step']}" if spec.get("scale") == "linear" and spec.get("step") else ""
            lines.append(
                f"{axis['param']} = {spec.get('scale', 'pow2')}({spec['start']}.."
                f"{spec['stop']}{step})"
            )
    return "\n".join(lines)


# Where the validator's errors show on the form.
FORM_FIELDS = {"fixed_params": "params_text", "axes": "axes_text", "exclusions": "exclusions_text"}


def _show(value: Any) -> str:
    if isinstance(value, list):  # a list parameter (qperf's tests) reads back as "a, b"
        return ", ".join(_show(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


class MatrixForm(forms.ModelForm):
    params_text = forms.CharField(
        label="Fixed parameters",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One per line, e.g. <code>size = 1g</code>, <code>bs = 1m</code>. The "
        "parameters of each tool are listed below.",
    )
    axes_text = forms.CharField(
        label="Axes",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One axis per line: <code>rw = write, read</code>, "
        "<code>numjobs = pow2(1..64)</code>, <code>bs = linear(4..16, 4)</code>; "
        "<code>target = btrfs-raid0, btrfs-raid10</code> sweeps a testbed's targets "
        "and <code>tuning:os.vm.dirty_ratio = 10, 40</code> a tuning key; in MPI mode "
        "<code>nodes = 1, 2, 4</code> (the first N client nodes) and "
        "<code>tasks_per_node = 1, 2</code>.",
    )
    exclusions_text = forms.CharField(
        label="Skip cells where",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One rule per line over parameters and testbed facts ("
        + ", ".join(FACT_NAMES)
        + "), e.g. <code>numjobs &gt; clients * cores</code>.",
    )

    class Meta:
        model = Matrix
        fields = [
            "name",
            "description",
            "tool",
            "launch_mode",
            "tasks_per_node",
            "testbeds",
            "tuning_sets",
            "repetitions",
            "max_repetitions",
            "target_cv",
            "order",
            "order_seed",
            "drop_caches",
            "apply_tuning",
            "timeout_s",
        ]
        help_texts = {
            "repetitions": "Runs per cell; with a maximum and a target CV below, the minimum.",
        }
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "testbeds": forms.CheckboxSelectMultiple,
            "tuning_sets": forms.CheckboxSelectMultiple,
        }

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tool"].choices = [(name, name) for name in sorted(ADAPTERS)]
        self.fields["testbeds"].queryset = Testbed.objects.order_by("-published", "name")
        self.user = user
        # What the text boxes held that did parse, when a line of theirs did not.
        self._parsed: dict[str, Any] = {}
        if user is not None:
            # Offered: the testbeds the user operates (and those the matrix names already);
            # another one posted gets clean_testbeds' message, not "not a valid choice".
            offered = Testbed.objects.operable_by(user)
            if self.instance.pk:
                offered = offered | Testbed.objects.filter(matrices=self.instance)
            self.fields["testbeds"].choices = [
                (t.pk, str(t)) for t in offered.distinct().order_by("name", "pk")
            ]
            self.fields["testbeds"].help_text = "Testbeds you operate."
        self.fields["order"].required = False
        self.fields["tuning_sets"].queryset = TuningSet.objects.order_by("name")
        self.fields["tuning_sets"].help_text = "None chosen: the runs use no tuning set."
        if self.instance.pk:
            self.fields["params_text"].initial = format_params(self.instance.fixed_params)
            self.fields["axes_text"].initial = format_axes(self.instance.axes)
            self.fields["exclusions_text"].initial = "\n".join(self.instance.exclusions)

    def clean_order(self) -> str:
        """Not given (an older form, a script posting the fields it knows): cell by cell."""
        return self.cleaned_data.get("order") or RunOrder.CELLS

    def clean_testbeds(self):
        testbeds = self.cleaned_data["testbeds"]
        if self.user is not None:
            for testbed in testbeds:
                problem = testbed.runs_refused(self.user)
                if problem:
                    raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return testbeds

    def clean_params_text(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        triples, errors = parse_lines(self.cleaned_data["params_text"])
        for number, key, value in triples:
            if key in params:
                errors.append(f"line {number}: {key} is given twice")
            params[key] = scalar(value)
        if errors:
            self._parsed["params_text"] = params
            raise forms.ValidationError(errors)
        return params

    def clean_axes_text(self) -> list[dict[str, Any]]:
        axes = []
        triples, errors = parse_lines(self.cleaned_data["axes_text"])
        for number, key, value in triples:
            compact = value.replace(" ", "")
            match = _RANGE_RE.match(compact)
            if not match and _RANGE_START_RE.match(compact):
                # "pow2(1.." is a range cut short, not a value named "pow2(1..".
                errors.append(
                    f"line {number}: {key}: {value!r} is not a range; write pow2(1..64) "
                    "or linear(4..16, 4)"
                )
                continue
            if match:
                scale, start, stop, step = match.groups()
                spec = {"start": int(start), "stop": int(stop), "scale": scale}
                if step:
                    spec["step"] = int(step)
                axes.append({"param": key, "range": spec})
            else:
                values = [scalar(v) for v in value.split(",") if v.strip()]
                axes.append({"param": key, "values": values})
        if errors:
            self._parsed["axes_text"] = axes
            raise forms.ValidationError(errors)
        return axes

    def clean(self) -> dict[str, Any]:
        """The definition goes through matrix_validation.validate_matrix, as the API's and
        YAML files' do; its errors land on the form's fields."""
        data = super().clean()
        data["exclusions"] = [
            line.strip()
            for line in (data.get("exclusions_text") or "").splitlines()
            if line.strip()
        ]
        # The lines of a text box that did parse are checked too, so that every problem of
        # the form shows at once (a bad line does not hide a bad value on the next one).
        definition = {k: data[k] for k in self.Meta.fields if k in data}
        definition.update(
            fixed_params=data.get("params_text", self._parsed.get("params_text", {})),
            axes=data.get("axes_text", self._parsed.get("axes_text", [])),
            exclusions=data["exclusions"],
        )
        try:
            clean = validate_matrix(definition, build_cells=not self.errors)
        except MatrixInvalid as exc:
            for field_name, messages in exc.renamed(FORM_FIELDS).items():
                target = field_name if field_name in self.fields else None
                if target in self.errors and target not in self._parsed:
                    continue  # already explained by the field's own check
                if target in self._parsed and any("is required" in m for m in messages):
                    # A required parameter may sit on a line that did not parse.
                    messages = [m for m in messages if "is required" not in m]
                for message in messages:
                    self.add_error(target, message)
            return data
        if self.errors:
            return data
        data["name"] = clean["name"]
        data["description"] = clean["description"]
        data["params_text"] = clean["fixed_params"]
        data["axes_text"] = clean["axes"]
        data["exclusions"] = clean["exclusions"]
        return data

    def save(self, commit: bool = True) -> Matrix:
        matrix = super().save(commit=False)
        matrix.fixed_params = self.cleaned_data["params_text"]
        matrix.axes = self.cleaned_data["axes_text"]
        matrix.exclusions = self.cleaned_data["exclusions"]
        if commit:
            matrix.save()
            self.save_m2m()
        return matrix


class MatrixImportForm(forms.Form):
    file = forms.FileField(required=False, label="YAML file")
    text = forms.CharField(
        required=False,
        label="or paste YAML",
        widget=forms.Textarea(attrs={"rows": 14, "class": "mono"}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        upload = data.get("file")
        if upload:
            problem = too_large(upload.size)
            if problem:
                raise forms.ValidationError(f"The file is {problem}.")
            try:
                data["yaml"] = upload.read(MAX_YAML_BYTES + 1).decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        else:
            data["yaml"] = data.get("text") or ""
        problem = too_large(len(data["yaml"].encode("utf-8", "surrogatepass")))
        if problem:
            raise forms.ValidationError(f"The YAML is {problem}.")
        if not data["yaml"].strip():
            raise forms.ValidationError("Choose a file or paste YAML.")
        return data
