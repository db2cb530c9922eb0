"""Create the first administrator when it is missing: from BEEWEB_ADMIN_USER and
BEEWEB_ADMIN_PASSWORD, or with a random password printed once. An existing user is never
changed: its password stays what its owner set (``manage.py changepassword`` resets it)."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create the admin user if it is missing (BEEWEB_ADMIN_PASSWORD or a random password "
        "printed once); an existing user and its password are left alone."
    )

    def handle(self, *args, **options):
        User = get_user_model()
        username = os.environ.get("BEEWEB_ADMIN_USER", "admin")
        password = os.environ.get("BEEWEB_ADMIN_PASSWORD", "")
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Admin user {username!r} exists already: left unchanged, credentials are not "
                "shown again (BEEWEB_ADMIN_PASSWORD applies only when the user is created; "
                f"reset with: python manage.py changepassword {username})."
            )
            return
        if not password and User.objects.filter(is_superuser=True).exists():
            self.stdout.write(
                "An admin user exists already; credentials are not shown again "
                "(reset with: python manage.py changepassword USERNAME)."
            )
            return
        if password:
            User.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(
                f"Admin user {username!r} created from BEEWEB_ADMIN_USER / BEEWEB_ADMIN_PASSWORD."
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(
            self.style.SUCCESS(
                "\n  beeweb admin created (shown once):\n"
                f"    user:     {username}\n    password: {password}\n"
            )
        )
