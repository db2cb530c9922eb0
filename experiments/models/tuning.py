"""Tuning sets: named parameters by scope, inheriting from a parent, with revisions."""

from __future__ import annotations

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse

from experiments.models.common import OwnedModel, PublishedModel, published_key_constraint
from experiments.shared.tuning_keys import normalise


class TuningSet(OwnedModel, PublishedModel):
    """Named tuning parameters; a child overrides its parent's values key by key."""

    name = models.CharField(max_length=160)
    description = models.TextField(blank=True)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        help_text="Inherit every parameter of this set and override some.",
    )
    revision = models.PositiveIntegerField(default=0, editable=False)
    # Flattened effective values ("scope.key" -> raw value) including inherited ones, kept in
    # step by ``refresh_effective``: the comparison groups runs by a tuning key in SQL.
    effective = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        constraints = [published_key_constraint()]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("experiments:tuningset", args=[self.uuid])

    def ancestors(self) -> list[TuningSet]:
        """Parent, grandparent, …; stops at a cycle."""
        chain, seen, current = [], {self.pk}, self.parent
        while current is not None and current.pk not in seen:
            chain.append(current)
            seen.add(current.pk)
            current = current.parent
        return chain

    def effective_params(self) -> dict[tuple[str, str], tuple[str, TuningSet]]:
        """(scope, key) -> (raw value, set it comes from), the nearest definition winning."""
        result: dict[tuple[str, str], tuple[str, TuningSet]] = {}
        for tuning_set in [*reversed(self.ancestors()), self]:
            for param in tuning_set.params.all():
                result[(param.scope, param.key)] = (param.value, tuning_set)
        return result

    def refresh_effective(self) -> None:
        """Recompute ``effective`` here and in every descendant."""
        self.effective = {f"{s}.{k}": v for (s, k), (v, _) in self.effective_params().items()}
        TuningSet.objects.filter(pk=self.pk).update(effective=self.effective)
        for child in self.children.all():
            child.refresh_effective()

    @transaction.atomic
    def replace_params(self, entries: list[tuple[str, str, str]], author=None) -> None:
        """Set this set's own parameters to ``entries`` [(scope, key, value)] and record a
        revision. Values must already be validated (``tuning_keys.normalise``)."""
        self.params.all().delete()
        TuningParameter.objects.bulk_create(
            TuningParameter.build(self, scope, key, value) for scope, key, value in entries
        )
        self.revision += 1
        TuningSet.objects.filter(pk=self.pk).update(revision=self.revision)
        TuningRevision.objects.create(
            tuning_set=self,
            number=self.revision,
            params=[[scope, key, value] for scope, key, value in entries],
            author=author if getattr(author, "is_authenticated", False) else None,
        )
        self.refresh_effective()


class TuningParameter(models.Model):
    """One key of a tuning set, as entered and as normalised (bytes, booleans, numbers)."""

    class Scope(models.TextChoices):
        STORAGE = "storage", "storage service"
        META = "meta", "metadata service"
        CLIENT = "client", "client"
        STRIPING = "striping", "striping"
        OS = "os", "operating system"
        LOCALFS = "localfs", "local file system"

    tuning_set = models.ForeignKey(TuningSet, on_delete=models.CASCADE, related_name="params")
    scope = models.CharField(max_length=10, choices=Scope.choices)
    key = models.CharField(max_length=120)
    value = models.CharField(max_length=1000)
    normalized = models.JSONField(null=True, blank=True)
    known = models.BooleanField(default=True, help_text="False for keys beeweb does not know.")
    source_ref = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["tuning_set", "scope", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["tuning_set", "scope", "key"],
                name="%(app_label)s_%(class)s_unique_set_scope_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope}.{self.key} = {self.value}"

    @classmethod
    def build(
        cls, tuning_set: TuningSet, scope: str, key: str, value: str, source_ref: str = ""
    ) -> TuningParameter:
        normalized, known = normalise(scope, key, value)
        return cls(
            tuning_set=tuning_set,
            scope=scope,
            key=key,
            value=value.strip(),
            normalized=normalized,
            known=known,
            source_ref=source_ref,
        )


class TuningRevision(models.Model):
    """A snapshot of a tuning set's own parameters after each change."""

    tuning_set = models.ForeignKey(TuningSet, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    params = models.JSONField(default=list)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tuning_set", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["tuning_set", "number"], name="%(app_label)s_%(class)s_unique_set_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tuning_set} r{self.number}"
