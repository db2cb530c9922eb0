"""Matrix pages: define (form or YAML), preview every command, launch, watch live progress,
re-run failed cells, resume, cancel; and cancelling one run."""

from __future__ import annotations

from uuid import UUID

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, prefetch_related_objects
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST

from experiments.comparison import latency_sweep, parcoords
from experiments.comparison.charts import display_unit
from experiments.execution import dispatch as dispatching
from experiments.inventory import localhost
from experiments.matrices import adaptive, livecheck, sampling
from experiments.matrices.axes import MatrixError
from experiments.matrices.comparing import compare_query
from experiments.matrices.expansion import (
    MatrixBusy,
    cancel_runs,
    delete_matrix,
    launch,
    progress,
    rerun_failed,
    rerun_runs,
    resume,
    resume_runs,
)
from experiments.matrices.files import from_yaml, to_yaml
from experiments.matrices.forms import MatrixForm, MatrixImportForm, format_axes, format_params
from experiments.matrices.launching import check_nodes, launch_refused
from experiments.matrices.preview import plan
from experiments.models import Matrix, Metric, Run, Worker
from experiments.shared import keyset
from experiments.templatetags.beeweb import num
from experiments.views.alerts import schedule_context
from experiments.views.common import (
    confirm_page,
    counted,
    get_for_user,
    render_form,
    safe_next,
    verb,
)
from runners import progress as tool_progress
from runners import slurm
from runners.tools import ADAPTERS

TAIL_LINES = 25
# Above this many runs the progress table lists the unfinished and failed runs and the most
# recent others (and links to the runs table of every run), so that the page and its polling
# cost the same on a matrix of 10,000 runs as on one of 100.
TABLE_LIMIT = 25
# The adaptive cells' table lists at most this many cells (they grow with the definition,
# not with the runs).
CELL_LIMIT = 300


# The matrix list: newest first, ties (matrices created in one bulk insert) by id; paged by
# a keyset cursor (experiments.shared.keyset), served by exp_matrix_created_id.
MATRIX_LIST_KEY = keyset.Key.of(("-created", "-id"))
MATRIX_LIST_PAGE = 50
ACTIVE_STATUSES = (Run.Status.QUEUED, Run.Status.RUNNING)


def run_counts(matrix_ids: list[int]) -> dict[int, dict[str, int]]:
    """Each matrix's runs by status, counted exactly in one grouped query over only these
    matrices' runs (an index-only scan of exp_run_matrix_status): the list's columns cost
    what the page's matrices hold, never every run of every matrix."""
    counts: dict[int, dict[str, int]] = {pk: {} for pk in matrix_ids}
    rows = (
        Run.objects.filter(matrix_id__in=matrix_ids)
        .values_list("matrix_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for matrix_id, status, n in rows:
        counts[matrix_id][status] = n
    return counts


def matrix_list(request: HttpRequest) -> HttpResponse:
    matrices = Matrix.objects.select_related("owner")
    cursor = request.GET.get("cursor", "")
    try:
        page = keyset.page(matrices, MATRIX_LIST_KEY, MATRIX_LIST_PAGE, cursor)
    except keyset.BadCursor as exc:
        context = {"error": f"cursor: {exc} (follow the newer and older links)"}
        return render(request, "experiments/matrix_list.html", context, status=400)
    counts = run_counts([m.pk for m in page.rows])
    for matrix in page.rows:
        by_status = counts[matrix.pk]
        matrix.n_runs = sum(by_status.values())
        matrix.n_done = by_status.get(Run.Status.SUCCEEDED, 0)
        matrix.n_failed = by_status.get(Run.Status.FAILED, 0)
        matrix.n_active = sum(by_status.get(s, 0) for s in ACTIVE_STATUSES)
    context = {
        "matrices": page.rows,
        "total": keyset.total(matrices, MATRIX_LIST_KEY),
        "newer_href": f"?{urlencode({'cursor': page.previous})}" if page.previous else "",
        "older_href": f"?{urlencode({'cursor': page.next})}" if page.next else "",
        "newest_href": "?" if cursor else "",
    }
    return render(request, "experiments/matrix_list.html", context)


# The first matrix the dashboard offers a new user: fio writing then reading 16 MiB per job
# with 1, 2 and 4 jobs, three times each (18 short runs) on this machine.
FIRST_MATRIX = {
    "name": "First fio matrix on this machine",
    "tool": "fio",
    "repetitions": 3,
    "fixed_params": {"size": "16m", "bs": "1m", "direct": False},
    "axes": [
        {"param": "rw", "values": ["write", "read"]},
        {"param": "numjobs", "values": [1, 2, 4]},
    ],
}


def first_matrix_initial(user) -> dict | None:
    """The new-matrix form filled with FIRST_MATRIX on the local testbed: the user reads it,
    saves it and launches it (a GET link creates nothing)."""
    testbed = localhost.local_testbed(user)
    if testbed is None:
        return None
    return {
        "name": FIRST_MATRIX["name"],
        "description": "A small first sweep: read the preview, then launch it.",
        "tool": FIRST_MATRIX["tool"],
        "repetitions": FIRST_MATRIX["repetitions"],
        "testbeds": [testbed.pk],
        "params_text": format_params(FIRST_MATRIX["fixed_params"]),
        "axes_text": format_axes(FIRST_MATRIX["axes"]),
    }


def _tool_docs() -> list[dict]:
    return [
        {
            "tool": name,
            "modes": (*adapter.modes, *(("slurm",) if slurm.inner_mode(adapter.modes) else ())),
            "params": adapter.describe(),
        }
        for name, adapter in sorted(ADAPTERS.items())
    ]


@require_http_methods(["GET", "POST"])
def matrix_edit(request: HttpRequest, uuid: UUID | None = None) -> HttpResponse:
    matrix = get_for_user(request, Matrix, uuid, write=True) if uuid else None
    initial = {}
    if matrix is None and request.method == "GET":
        initial = {"tool": request.GET.get("tool", "fio")}
        if request.GET.get("example") == "local":
            initial = first_matrix_initial(request.user) or initial
    form = MatrixForm(request.POST or None, instance=matrix, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        saved = form.save(commit=False)
        if matrix is None:
            saved.owner = request.user
        saved.save()
        form.save_m2m()
        messages.success(request, f"Saved matrix {saved}. Check the preview, then launch it.")
        return render_form(request, {}, success_url=saved.get_absolute_url())
    return render_form(
        request,
        {
            "form": form,
            "object": matrix,
            "tool_docs": _tool_docs(),
            "title": f"Edit {matrix}" if matrix else "New matrix",
            "action": request.path,
            "cancel": matrix.get_absolute_url() if matrix else reverse("experiments:matrix_list"),
        },
        page="experiments/matrix_form.html",
    )


@require_http_methods(["GET", "POST"])
def matrix_import(request: HttpRequest) -> HttpResponse:
    form = MatrixImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            matrix = from_yaml(form.cleaned_data["yaml"], request.user)
        except MatrixError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Created matrix {matrix} from YAML.")
            return render_form(request, {}, success_url=matrix.get_absolute_url())
    response = render_form(
        request,
        {
            "form": form,
            "title": "Import a matrix from YAML",
            "action": request.path,
            "multipart": True,
            "cancel": reverse("experiments:matrix_list"),
            "help": "The same format as the Export button and manage.py launch_matrix.",
        },
    )
    if request.method == "POST" and not request.htmx:
        response.status_code = 400  # the file was refused (htmx swaps only 2xx answers)
    return response


def matrix_export(request: HttpRequest, uuid: UUID) -> HttpResponse:
    matrix = get_for_user(request, Matrix, uuid)
    response = HttpResponse(to_yaml(matrix), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{slugify(matrix.name) or "matrix"}.yaml"'
    )
    return response


def _runs(matrix: Matrix):
    """The matrix's runs with what the progress table shows of them, by cell."""
    return (
        matrix.runs.select_related("testbed").only(*TABLE_FIELDS).order_by("cell_key", "repetition")
    )


# What the progress table reads of a run (templates/experiments/_matrix_progress.html).
TABLE_FIELDS = (
    "uuid",
    "label",
    "tool",
    "matrix",
    "testbed__name",
    "status",
    "cell_key",
    "repetition",
    "attempts",
    "launch",
    "queue",
    "started_at",
    "finished_at",
    "waiting_for",
    "error",
    "parse_error",
)


def _results(run_ids: list[int]) -> dict[int, str]:
    """Each succeeded run's headline in display units for the Result column: its primary
    throughput metrics (``write_bw 1.52 GB/s · read_bw 2.1 GB/s``), or its first primary
    metric when it has no throughput (IOPS of a metadata tool, latency of ioping)."""
    per_run: dict[int, list[tuple[str, float, str]]] = {}
    rows = Metric.objects.filter(run_id__in=run_ids, primary=True).order_by("run_id", "name")
    for run_id, name, value, unit in rows.values_list("run_id", "name", "value", "unit"):
        per_run.setdefault(run_id, []).append((name, value, unit))
    results = {}
    for run_id, metrics in per_run.items():
        shown = [m for m in metrics if m[0].endswith("_bw")] or metrics[:1]
        parts = []
        for name, value, unit in shown:
            label, divisor = display_unit(unit)
            parts.append(f"{name} {num(value / divisor)} {label}".rstrip())
        results[run_id] = " · ".join(parts)
    return results


# The order the progress table lists a large matrix's runs in: what needs attention first,
# each status in an order its index (exp_run_matrix_status: matrix, status, finished_at, id)
# reads without sorting the matrix's runs: running runs by cell (they are few: one per busy
# worker), failed and cancelled ones latest first, queued and planned ones in the order they
# are sent; then the most recently finished succeeded runs.
ATTENTION = (
    (Run.Status.RUNNING, ("cell_key", "repetition")),
    (Run.Status.FAILED, ("-finished_at", "-id")),
    (Run.Status.QUEUED, ("finished_at", "id")),
    (Run.Status.CANCELLED, ("-finished_at", "-id")),
    (Run.Status.PLANNED, ("finished_at", "id")),
    (Run.Status.IMPORTED, ("-finished_at", "-id")),
    (Run.Status.PUBLISHED, ("-finished_at", "-id")),
    (Run.Status.SUCCEEDED, ("-finished_at", "-id")),
)


def _table_runs(matrix: Matrix, counts: dict[str, int], total: int) -> list[Run]:
    """The runs the progress table lists: every run of a matrix of up to TABLE_LIMIT runs (by
    cell and repetition); of a larger one, up to TABLE_LIMIT runs in ATTENTION's order, one
    bounded query per status the matrix has runs of, so that a matrix of 10,000 runs costs
    what one of 300 does."""
    runs_qs = _runs(matrix)
    if total <= TABLE_LIMIT:
        return list(runs_qs)
    runs: list[Run] = []
    for status, order in ATTENTION:
        room = TABLE_LIMIT - len(runs)
        if room <= 0:
            break
        if counts.get(status):
            runs += list(runs_qs.filter(status=status).order_by(*order)[:room])
    return runs


def _progress_context(matrix: Matrix) -> dict:
    state = progress(matrix)
    runs = _table_runs(matrix, state["counts"], state["total"])
    hidden = state["total"] - len(runs)
    running = [r for r in runs if r.status == Run.Status.RUNNING]
    tails = {}
    live = {}
    if running:
        for pk, tool, text in Run.objects.filter(pk__in=[r.pk for r in running]).values_list(
            "pk", "tool", "raw_output"
        ):
            tails[pk] = "\n".join(text.splitlines()[-TAIL_LINES:])
            live[pk] = tool_progress.progress(tool, text[-tool_progress.TAIL_CHARS :])
    results = _results([r.pk for r in runs if r.status == Run.Status.SUCCEEDED])
    now = timezone.now()
    for run in runs:
        run.tail = tails.get(run.pk, "")
        run.live = live.get(run.pk)
        run.result = results.get(run.pk, "")
        if run.started_at:
            run.elapsed = ((run.finished_at or now) - run.started_at).total_seconds()
        else:
            run.elapsed = None
    queues = {r.queue for r in runs if r.status == Run.Status.QUEUED}
    online = {
        q for w in Worker.objects.filter(last_seen__gte=now - Worker.ONLINE_AFTER) for q in w.queues
    }
    return {
        "matrix": matrix,
        "runs": runs,
        "progress": state,
        "hidden": hidden,
        "waiting_queues": sorted(q for q in queues if q not in online),
        "adaptive": adaptive.cell_summary(matrix, CELL_LIMIT),
    }


def matrix_detail(request: HttpRequest, uuid: UUID) -> HttpResponse:
    matrix = get_for_user(request, Matrix, uuid)
    # Read once for the facts, the comparison link's series and the table link's columns.
    prefetch_related_objects([matrix], "testbeds", "tuning_sets")
    context = _progress_context(matrix)
    try:
        context["plan"] = plan(matrix)
    except MatrixError as exc:
        context["plan_error"] = str(exc)
    context["can_edit"] = matrix.can_edit(request.user)
    if context["can_edit"]:
        # Said before the Launch button is pressed: testbeds the user does not operate, and
        # nodes a run would use that their owner does not share.
        refused = launch_refused(matrix, request.user)
        if refused is None:
            try:
                check_nodes(matrix)
            except MatrixError as exc:
                refused = exc.message
        context["launch_refused"] = refused
    context["schedule_part"] = schedule_context(request, matrix)
    context["yaml"] = to_yaml(matrix)
    # A large matrix's charts draw a sample of its runs, read in bounded time: the first
    # repetitions of every cell (experiments.matrices.sampling).
    drawn = sampling.sample(matrix, context["progress"]["total"])
    run_ids = None
    if drawn.partial:
        run_ids = list(
            drawn.runs().filter(status__in=Run.DATA).values_list("pk", flat=True)[: drawn.limit]
        )
    context["sample"] = drawn
    context["compare_query"] = compare_query(matrix, run_ids)
    # The sweep at a glance (parallel coordinates) and its runs as a table, both of the
    # metric the comparison link opens on.
    metric = QueryDict(context["compare_query"]).get("metric", "")
    context["parcoords"] = parcoords.matrix_figure(matrix, metric, run_ids=run_ids)
    context["latency_sweep"] = latency_sweep.matrix_context(
        matrix,
        run_ids,
        of=f"the finished runs of {drawn.describe()}" if drawn.partial else "the finished runs",
    )
    context["beegfs_changes"] = beegfs_changes(matrix)
    axes = [a["param"] for a in matrix.axes if ":" not in a.get("param", ":")]
    cols = [f"param:{a}" for a in axes]
    if len(matrix.testbeds.all()) > 1:
        cols.append("testbed")
    cols += [f"metric:{metric}", "status"]
    context["table_query"] = urlencode(
        {"matrix": str(matrix.uuid), "cols": ",".join(cols), "sort": f"-metric:{metric}"}
    )
    return render(request, "experiments/matrix_detail.html", context)


def beegfs_changes(matrix: Matrix) -> list:
    """The BeeGFS server config changes this matrix's runs made (experiments.execution.beegfs),
    oldest first, each with its keys as (key, before, written)."""
    changes = list(matrix.beegfs_changes.order_by("applied_at", "pk")[:200])
    for change in changes:
        change.keys = [(k, (change.before or {}).get(k), v) for k, v in change.after.items()]
    return changes


def matrix_progress(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """The live part of the matrix page (htmx polls it while runs are queued or running)."""
    matrix = get_for_user(request, Matrix, uuid)
    context = _progress_context(matrix)
    context["can_edit"] = matrix.can_edit(request.user)
    return render(request, "experiments/_matrix_progress.html", context)


def _action(request: HttpRequest, uuid: UUID, action, *, operate: bool = True) -> HttpResponse:
    """Run ``action`` on the matrix; ``operate``: it sends runs, so the user must operate
    every testbed of the matrix (cancelling needs only the right to edit it)."""
    matrix = get_for_user(request, Matrix, uuid, write=True)
    refused = launch_refused(matrix, request.user) if operate else None
    if refused:
        messages.error(request, f"Nothing was launched: {refused}.")
        return redirect(matrix.get_absolute_url())
    try:
        text = action(matrix)
    except MatrixError as exc:
        messages.error(request, f"Nothing was launched. {exc}")
    except dispatching.BrokerUnavailable as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, text)
    return redirect(matrix.get_absolute_url())


# The actions that start runs after the live topology check: page title, button.
CHECKED_ACTIONS = {
    "launch": ("Launch", "Launch anyway"),
    "rerun": ("Re-run the failed runs of", "Re-run anyway"),
    "resume": ("Resume", "Resume anyway"),
}


def _checked_action(request: HttpRequest, uuid: UUID, name: str, start, runs=None) -> HttpResponse:
    """Start runs (``start(matrix)`` returns the message), after asking each testbed's live
    cluster (``matrices.livecheck``) whether it still looks as stored: differences (or a
    node that cannot be asked) show a page that names them, and only its "Launch anyway"
    (``anyway=1``) goes ahead, recorded on the matrix with ``name`` (launch, rerun,
    resume). ``runs(matrix)``: the runs the action sends; only their testbeds are asked, and
    nothing is asked when there are none."""
    checks: list[livecheck.LiveCheck] = []
    matrix = get_for_user(request, Matrix, uuid, write=True)
    if launch_refused(matrix, request.user) is None:
        sent = None if runs is None else runs(matrix)
        if sent is None or sent.exists():
            checks = livecheck.check_matrix(matrix, request.user, runs=sent)
        if checks and request.POST.get("anyway") != "1":
            return render(
                request,
                "experiments/matrix_launch_check.html",
                {
                    "matrix": matrix,
                    "checks": checks,
                    "action_url": reverse(f"experiments:matrix_{name}", args=[matrix.uuid]),
                    "title": CHECKED_ACTIONS[name][0],
                    "anyway": CHECKED_ACTIONS[name][1],
                },
            )

    def started(matrix):
        text = start(matrix)
        if checks:
            livecheck.record_override(matrix, request.user, checks, name)
            text += " The live topology's differences were overridden (recorded)."
        return text

    return _action(request, uuid, started)


@require_POST
def matrix_launch(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Launch, after the live topology check (``_checked_action``)."""

    def launched(matrix):
        counts = launch(matrix)
        return (
            f"Launched: {counted(counts['queued'], 'run')} queued ({counts['created']} new, "
            f"{counts['excluded']} excluded by rules)."
        )

    return _checked_action(request, uuid, "launch", launched)


@require_POST
def matrix_rerun(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Queue the failed and cancelled runs again, after the live topology check of their
    testbeds."""
    return _checked_action(
        request,
        uuid,
        "rerun",
        lambda m: f"Queued {counted(rerun_failed(m), 'failed or cancelled run')} again.",
        rerun_runs,
    )


@require_POST
def matrix_resume(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Send the planned and queued runs again, after the live topology check of their
    testbeds."""
    return _checked_action(
        request,
        uuid,
        "resume",
        lambda m: f"Sent {counted(resume(m), 'planned or queued run')} to their workers again.",
        resume_runs,
    )


@require_http_methods(["GET", "POST"])
def matrix_cancel(request: HttpRequest, uuid: UUID) -> HttpResponse:
    if request.method == "GET":
        matrix = get_for_user(request, Matrix, uuid, write=True)
        queued = matrix.runs.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]).count()
        running = matrix.runs.filter(status=Run.Status.RUNNING).count()
        return confirm_page(
            request,
            f"Cancel the runs of {matrix}?",
            "Cancel runs",
            matrix.get_absolute_url(),
            f"{counted(queued, 'queued or planned run')} {verb(queued, 'is', 'are')} cancelled; "
            f"{counted(running, 'running run')} {verb(running, 'is', 'are')} stopped.",
        )

    def cancel(matrix):
        counts = cancel_runs(matrix.runs.all())
        cancelled, stopping = counts["cancelled"], counts["stopping"]
        if not cancelled and not stopping:
            return "Nothing to cancel: no run of this matrix is queued or running."
        parts = []
        if cancelled:
            parts.append(f"Cancelled {counted(cancelled, 'queued run')}")
        if stopping:
            parts.append(
                f"{counted(stopping, 'running run')} {verb(stopping, 'is', 'are')} being stopped"
            )
        text = "; ".join(parts) + "."
        return text[0].upper() + text[1:]

    return _action(request, uuid, cancel, operate=False)


@require_http_methods(["GET", "POST"])
def matrix_delete(request: HttpRequest, uuid: UUID) -> HttpResponse:
    matrix = get_for_user(request, Matrix, uuid, write=True)
    if request.method == "POST":
        name = str(matrix)
        try:
            delete_matrix(matrix)
        except MatrixBusy as exc:
            messages.error(request, f"Not deleted: {exc}")
            return redirect(matrix.get_absolute_url())
        messages.success(request, f"Deleted matrix {name} and its runs.")
        return redirect("experiments:matrix_list")
    return render(
        request,
        "experiments/confirm_delete.html",
        {
            "object": matrix,
            "cancel": matrix.get_absolute_url(),
            "consequence": (
                f"Its {counted(matrix.runs.count(), 'run')} and their metrics are deleted too."
            ),
        },
    )


@require_http_methods(["GET", "POST"])
def run_cancel(request: HttpRequest, uuid: UUID) -> HttpResponse:
    run = get_object_or_404(Run, uuid=uuid)
    if not run.can_edit(request.user):
        raise PermissionDenied("Only the owner may cancel this run.")
    if request.method == "GET":
        back = safe_next(request, run.get_absolute_url())
        return confirm_page(
            request,
            f"Cancel run {run}?",
            "Cancel the run",
            back,
            "Its tool is stopped now." if run.status == Run.Status.RUNNING else "",
            [("next", back)],
        )
    counts = cancel_runs(Run.objects.filter(pk=run.pk))
    if counts["cancelled"]:
        # Queued, or running on a worker that is gone: the error says which.
        error = Run.objects.filter(pk=run.pk).values_list("error", flat=True).first() or ""
        messages.success(request, f"Cancelled: {error}." if error else "Cancelled.")
    elif counts["stopping"]:
        messages.success(request, "Stopping: its worker kills the process group.")
    else:
        messages.info(request, f"Nothing to cancel: the run is {run.get_status_display()}.")
    return redirect(safe_next(request, run.get_absolute_url()))


def run_live(request: HttpRequest, uuid: UUID) -> HttpResponse:
    """Status, elapsed time and the tail of the output of one run (htmx polling)."""
    run = get_object_or_404(Run.objects.visible_to(request.user), uuid=uuid)
    tail = "\n".join(run.raw_output.splitlines()[-200:])
    live = None
    if run.status == Run.Status.RUNNING:
        live = tool_progress.progress(run.tool, run.raw_output[-tool_progress.TAIL_CHARS :])
    elapsed = None
    if run.started_at:
        elapsed = ((run.finished_at or timezone.now()) - run.started_at).total_seconds()
    active = run.status in (Run.Status.QUEUED, Run.Status.RUNNING)
    response = render(
        request,
        "experiments/_run_live.html",
        {
            "run": run,
            "tail": tail,
            "live": live,
            "elapsed": elapsed,
            "active": active,
            "can_edit": run.can_edit(request.user),
        },
    )
    if request.htmx and not active:
        # The run ended while the page watched it: reload once to show its metrics.
        response["HX-Refresh"] = "true"
    return response
