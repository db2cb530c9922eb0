"""Scheduled matrices and alerts: a matrix's schedule (an htmx fragment of the matrix page,
its owner's only), one's own alert subscriptions, and the recent alerts one was sent with
their delivery status."""

from __future__ import annotations

from uuid import UUID

from django import forms
from django.contrib import messages
from django.db.models import Prefetch, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from experiments.alerts.access import subscribe_refused
from experiments.matrices.axes import MatrixError
from experiments.matrices.schedules import delete_schedule, save_schedule
from experiments.models import Alert, Delivery, Matrix, MatrixSchedule, Subscription, Testbed
from experiments.models.alerts import MAX_EVERY_S, MIN_EVERY_S
from experiments.shared.utils import is_uuid
from experiments.views.common import get_for_user
from experiments.views.compare import MATRIX_CHOICES

RECENT_FIRINGS = 20
RECENT_ALERTS = 100


class ScheduleForm(forms.Form):
    cron = forms.CharField(
        required=False,
        max_length=100,
        label="Cron (UTC)",
        help_text="minute hour day-of-month month day-of-week, e.g. <code>30 2 * * *</code>, "
        "or @daily, @nightly (02:00), @weekly",
    )
    every_s = forms.IntegerField(
        required=False,
        min_value=MIN_EVERY_S,
        max_value=MAX_EVERY_S,
        label="or every (s)",
        help_text=f"an interval of {MIN_EVERY_S} s or more instead of a cron expression",
    )
    deadline_s = forms.IntegerField(
        min_value=1,
        max_value=7 * 24 * 3600,
        initial=6 * 3600,
        label="Deadline (s)",
        help_text="a firing not finished this long after it is a missing run (alerted)",
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled (untick: paused)")

    def clean(self):
        data = super().clean()
        if bool((data.get("cron") or "").strip()) == (data.get("every_s") is not None):
            raise forms.ValidationError("Give either a cron expression or an interval.")
        return data


def _schedule_context(matrix: Matrix, form: ScheduleForm | None = None) -> dict:
    schedule = MatrixSchedule.objects.filter(matrix=matrix).first()
    if form is None:
        initial = {"enabled": True, "deadline_s": 6 * 3600}
        if schedule:
            initial = {
                "cron": schedule.cron,
                "every_s": schedule.every_s,
                "deadline_s": schedule.deadline_s,
                "enabled": schedule.enabled,
            }
        form = ScheduleForm(initial=initial)
    return {
        "matrix": matrix,
        "schedule": schedule,
        "schedule_form": form,
        "firings": list(schedule.firings.all()[:RECENT_FIRINGS]) if schedule else [],
    }


def schedule_context(request: HttpRequest, matrix: Matrix) -> dict | None:
    """The matrix page's schedule part: its owner's (and staff's) only."""
    if not matrix.can_edit(request.user):
        return None
    return _schedule_context(matrix)


@require_http_methods(["GET", "POST"])
def matrix_schedule(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """GET: the schedule fragment; POST: save it (``delete=1``: remove it). Owner or staff."""
    matrix = get_for_user(request, Matrix, uuid, write=True)
    status = 200
    form = None
    if request.method == "POST":
        if request.POST.get("delete") == "1":
            schedule = MatrixSchedule.objects.filter(matrix=matrix).first()
            if schedule:
                delete_schedule(schedule)
        else:
            form = ScheduleForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    save_schedule(
                        matrix,
                        cron=data["cron"] or "",
                        every_s=data["every_s"],
                        enabled=data["enabled"],
                        deadline_s=data["deadline_s"],
                    )
                except MatrixError as exc:
                    form.add_error(exc.field if exc.field in form.fields else None, exc.message)
                else:
                    form = None
            if form is not None:
                status = 400
        if not request.htmx and status == 200:
            messages.success(request, "Schedule saved.")
            return redirect(matrix.get_absolute_url())
    context = _schedule_context(matrix, form)
    template = "experiments/_matrix_schedule.html"
    return render(request, template, context, status=status)


class SubscriptionForm(forms.Form):
    testbed = forms.ModelChoiceField(
        queryset=Testbed.objects.none(), required=False, to_field_name="uuid"
    )
    matrix = forms.ModelChoiceField(
        queryset=Matrix.objects.none(), required=False, to_field_name="uuid"
    )
    email = forms.EmailField(required=False, label="E-mail")
    webhook_url = forms.URLField(
        required=False,
        max_length=500,
        label="Webhook URL",
        assume_scheme="https",
        help_text="http:// or https://; each alert is POSTed as JSON, signed (see below)",
    )

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["testbed"].queryset = Testbed.objects.operable_by(user).order_by("name")
        matrices = Matrix.objects.all() if user.is_staff else Matrix.objects.filter(owner=user)
        field = self.fields["matrix"]
        field.queryset = matrices.order_by("name")
        # The select lists the chosen matrix and the newest MATRIX_CHOICES others, not a
        # lab's whole history (10,000 matrices were 2 s and 800 KB of this page); any of
        # the queryset is accepted. A matrix's own page links here with it chosen.
        chosen = self.data.get("matrix") if self.is_bound else self.initial.get("matrix")
        chosen = str(chosen or "")
        pairs = matrices.values_list("uuid", "name")
        listed = list(pairs.filter(uuid=chosen)) if is_uuid(chosen) else []
        newest = pairs.exclude(uuid__in=[u for u, _ in listed]).order_by("-created", "-id")
        listed += newest[:MATRIX_CHOICES]
        field.widget.choices = [("", field.empty_label), *listed]
        total = matrices.count() if len(listed) >= MATRIX_CHOICES else len(listed)
        if total > len(listed):
            field.help_text = (
                f"The newest {len(listed)} of the {total:,} matrices you may subscribe to are "
                "listed: for another, use Subscribe on its matrix page."
            )

    def clean_webhook_url(self):
        url = self.cleaned_data.get("webhook_url") or ""
        if url and not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("A webhook URL starts with http:// or https://.")
        return url

    def clean(self):
        data = super().clean()
        testbed, matrix = data.get("testbed"), data.get("matrix")
        if self.errors:
            return data
        if bool(testbed) == bool(matrix):
            raise forms.ValidationError("Choose one testbed or one matrix.")
        if not data.get("email") and not data.get("webhook_url"):
            raise forms.ValidationError("Give an e-mail address, a webhook URL or both.")
        refused = subscribe_refused(self.user, testbed=testbed, matrix=matrix)
        if refused:
            raise forms.ValidationError(f"You cannot subscribe: {refused}.")
        return data


@never_cache
@require_http_methods(["GET", "POST"])
def subscription_list(request: HttpRequest) -> HttpResponse:
    """One's own subscriptions (with their webhook secrets) and the form for a new one."""
    status = 200
    if request.method == "POST":
        form = SubscriptionForm(request.user, request.POST)
        if form.is_valid():
            data = form.cleaned_data
            Subscription.objects.create(
                user=request.user,
                testbed=data["testbed"],
                matrix=data["matrix"],
                email=data["email"],
                webhook_url=data["webhook_url"],
            )
            messages.success(request, "Subscribed.")
            return redirect("experiments:subscription_list")
        status = 400
    else:
        # A link from a testbed's or a matrix's page names it (the form's choices still
        # hold only what the user may subscribe to).
        initial = {"email": request.user.email}
        for name in ("testbed", "matrix"):
            if is_uuid(request.GET.get(name, "")):
                initial[name] = request.GET[name]
        form = SubscriptionForm(request.user, initial=initial)
    subscriptions = Subscription.objects.filter(user=request.user).select_related(
        "testbed", "matrix"
    )
    return render(
        request,
        "experiments/subscription_list.html",
        {"form": form, "subscriptions": subscriptions},
        status=status,
    )


@require_POST
def subscription_delete(request: HttpRequest, uuid: UUID) -> HttpResponse:
    # Another user's subscription is not found: its existence is not theirs to learn.
    subscription = get_object_or_404(Subscription, uuid=uuid, user=request.user)
    subscription.delete()
    messages.success(request, "Unsubscribed.")
    return redirect("experiments:subscription_list")


def alert_list(request: HttpRequest) -> HttpResponse:
    """Recent alerts sent to the user, or about matrices they own, each with the user's own
    deliveries and their status."""
    mine = Delivery.objects.filter(user=request.user).order_by("channel", "pk")
    alerts = (
        Alert.objects.filter(Q(deliveries__user=request.user) | Q(matrix__owner=request.user))
        .distinct()
        .select_related("testbed", "matrix")
        .prefetch_related(Prefetch("deliveries", queryset=mine, to_attr="mine"))
        .order_by("-created", "-pk")[:RECENT_ALERTS]
    )
    return render(request, "experiments/alert_list.html", {"alerts": alerts})
