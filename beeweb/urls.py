"""Top-level URLs: auth, admin, the REST API and the experiments app."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe


@login_not_required
@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers, feed readers and bookmarks ask for /favicon.ico whatever the page links:
    send them to the icon the pages link (static/favicon.svg, by its hashed name), not to a
    404 in every server log."""
    return redirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("experiments.api.urls")),
    path("", include("experiments.urls")),
]
