"""Create the first administrator when it is missing: from BEEWEB_ADMIN_USER and
BEEWEB_ADMIN_PASSWORD, or with a random password printed once. An existing user is never
changed: its password stays what its owner set (``manage.py changepassword`` resets it)."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


def box(lines: list[str]) -> str:
    """``lines`` framed, so that they stand out of a terminal's start-up messages."""
    width = max(len(line) for line in lines)
    rule = "+" + "-" * (width + 4) + "+"
    return "\n".join(["", rule, *(f"|  {line.ljust(width)}  |" for line in lines), rule, ""])


class Command(BaseCommand):
    help = (
        "Create the admin user if it is missing (BEEWEB_ADMIN_PASSWORD or a random password "
        "printed once); an existing user and its password are left alone."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--url",
            default="",
            help="where beeweb is served: the message is then a box with the address and "
            "how to sign in, as `make run` ends its start-up with it",
        )

    def handle(self, *args, **options):
        url = options.get("url") or ""
        lines = self.lines(
            os.environ.get("BEEWEB_ADMIN_USER", "admin"),
            os.environ.get("BEEWEB_ADMIN_PASSWORD", ""),
        )
        if url:
            lines = [f"beeweb is at {url}", "", *lines]
            self.stdout.write(self.style.SUCCESS(box(lines)))
        else:
            self.stdout.write("\n".join(lines))

    def lines(self, username: str, password: str) -> list[str]:
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            return [
                f"Admin user {username!r} exists already: left unchanged, credentials are not",
                "shown again (BEEWEB_ADMIN_PASSWORD applies only when the user is created;",
                f"reset with: python manage.py changepassword {username}).",
            ]
        if not password and User.objects.filter(is_superuser=True).exists():
            return [
                "An admin user exists already; credentials are not shown again",
                "(reset with: python manage.py changepassword USERNAME).",
            ]
        if password:
            User.objects.create_superuser(username=username, email="", password=password)
            return [
                f"Admin user {username!r} created from BEEWEB_ADMIN_USER / BEEWEB_ADMIN_PASSWORD."
            ]
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        return [
            "beeweb admin created (shown once, keep it):",
            f"  user:     {username}",
            f"  password: {password}",
        ]
