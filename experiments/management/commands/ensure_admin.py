"""Create the first administrator: from BEEWEB_ADMIN_USER/BEEWEB_ADMIN_PASSWORD, or a random
password printed once."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the admin user if no superuser exists (credentials printed once)."

    def handle(self, *args, **options):
        User = get_user_model()
        username = os.environ.get("BEEWEB_ADMIN_USER", "admin")
        password = os.environ.get("BEEWEB_ADMIN_PASSWORD", "")
        if password:
            user, created = User.objects.get_or_create(username=username)
            user.is_staff = user.is_superuser = True
            user.set_password(password)
            user.save()
            self.stdout.write(
                f"Admin user {username!r} {'created' if created else 'updated'} "
                "from BEEWEB_ADMIN_USER / BEEWEB_ADMIN_PASSWORD."
            )
            return
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write(
                "An admin user exists already; credentials are not shown again "
                "(reset with: python manage.py changepassword admin)."
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
