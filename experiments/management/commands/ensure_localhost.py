"""`manage.py ensure_localhost [--owner USER]`: this machine as the "localhost" testbed."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from experiments.inventory.localhost import ensure_localhost_testbed


class Command(BaseCommand):
    help = (
        "Create (or refresh) the 'localhost' testbed: this machine as a node with every "
        "role, a benchmark directory under BEEWEB_DATA_DIR, and its worker's queue."
    )

    def add_arguments(self, parser):
        parser.add_argument("--owner", help="Owner (default: the first superuser).")

    def handle(self, *args, owner, **options):
        users = get_user_model().objects
        user = (
            users.filter(username=owner).first()
            if owner
            else users.filter(is_superuser=True).order_by("pk").first()
        )
        if user is None:
            raise CommandError(
                "no such user" if owner else "no superuser yet: run manage.py ensure_admin first"
            )
        testbed = ensure_localhost_testbed(user)
        node = testbed.members.select_related("node").first()
        self.stdout.write(
            f"testbed {testbed.name}: benchmarks write to {testbed.benchmark_dir}"
            + (f"; worker queue node.{node.node.hostname}" if node else "")
        )
