"""The signed-in user's API token: shown on /api/token/, created or replaced by a POST."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token


@never_cache  # the page shows the key: Cache-Control no-store, never kept by a browser or proxy
@require_http_methods(["GET", "POST"])
def token_page(request: HttpRequest) -> HttpResponse:
    token = Token.objects.filter(user=request.user).first()
    if request.method == "POST":
        if token is not None:
            token.delete()
        if request.POST.get("action") != "revoke":
            Token.objects.create(user=request.user)
            messages.success(
                request,
                "A new API token was created; the old one no longer works."
                if token is not None
                else "Your API token was created.",
            )
        elif token is not None:
            messages.success(request, "Your API token was revoked.")
        else:
            messages.info(request, "You had no API token: nothing was revoked.")
        return redirect("api:token")
    return render(
        request, "api/token.html", {"token": token, "base_url": request.build_absolute_uri("/")}
    )
