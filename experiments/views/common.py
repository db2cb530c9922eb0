"""Access helpers and the htmx-aware form rendering every view uses."""

from __future__ import annotations

from uuid import UUID

from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme


def get_for_user(
    request: HttpRequest, model: type[Model], uuid: UUID, *, write: bool = False, queryset=None
):
    """The object with this UUID, readable by any signed-in user (a lab's shared inventory);
    writing needs its owner or staff, and published study data is never writable."""
    obj = get_object_or_404(queryset if queryset is not None else model.objects, uuid=uuid)
    if write and not obj.can_edit(request.user):
        published = getattr(obj, "published", False)
        raise PermissionDenied(
            "Published study data is read-only." if published else "Only the owner may change this."
        )
    return obj


def safe_next(request: HttpRequest, fallback: str) -> str:
    """The ``next`` parameter of a POST (or GET) when it points into beeweb itself, else
    ``fallback``: a link from elsewhere cannot turn a beeweb form into a redirect to any site."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def render_form(
    request: HttpRequest,
    context: dict,
    *,
    success_url: str | None = None,
    page: str = "experiments/object_form.html",
) -> HttpResponse:
    """After a successful POST, redirect (HX-Redirect for htmx). Otherwise render the form:
    the fragment alone for htmx requests, the full page otherwise."""
    if success_url is not None:
        if request.htmx:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = success_url
            return response
        return redirect(success_url)
    template = "experiments/_form.html" if request.htmx else page
    return render(request, template, context)


def confirm_page(
    request: HttpRequest,
    question: str,
    button: str,
    back: str,
    consequence: str = "",
    fields: list[tuple[str, str]] | None = None,
) -> HttpResponse:
    """The page a GET of a Cancel or Revoke URL shows: the question the page's script asks
    (``data-confirm``) for a browser without JavaScript, whose button posts to the same URL.
    A POST acts at once, as scripts and the API expect."""
    return render(
        request,
        "experiments/confirm_action.html",
        {
            "question": question,
            "button": button,
            "back": back,
            "consequence": consequence,
            "fields": fields or [],
            "action": request.path,
        },
    )


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """ "1 run", "2 runs", "0 runs": messages count things that are often one."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def verb(n: int, singular: str, plural: str) -> str:
    """The verb agreeing with a count: "1 run is", "2 runs are"."""
    return singular if n == 1 else plural
