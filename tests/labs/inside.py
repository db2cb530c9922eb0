"""What the end-to-end tests do inside a stack's Django, as real functions (no Python in
strings): ``stack.call("inventory", spec)`` runs ``python -m tests.labs inventory '[spec]'``
against the stack's database and hands back the result through JSON. Arguments and results
are JSON values (users by name, matrices by primary key); Django is set up by then, so the
models are imported inside the functions."""

from __future__ import annotations

ROLES = ("client", "storage", "metadata", "management")


def inventory(spec: dict) -> None:
    """Users, nodes and testbeds from data::

        {"users": {"alice": "password", ...},           # created (the admin exists already)
         "nodes": {"node1": {"owner": "alice", "address": "10.0.0.1", "shared": false}, ...},
         "testbeds": [{"name": "tb", "owner": "alice", "benchmark_dir": "/tmp/bench",
                       "slurm_partition": "", "members": {"node1": ["client"], ...},
                       "targets": [{"node": "node1", "name": "t1", "path": "..."}]}]}

    Every owner gets one hardware profile ("box", x86_64) for their nodes; a target is a
    storage target without RAID."""
    from django.contrib.auth import get_user_model

    from experiments.models import HardwareProfile, Node, Target, Testbed, TestbedNode

    users = get_user_model().objects
    for username, password in spec.get("users", {}).items():
        users.create_user(username, password=password)
    profiles: dict[str, HardwareProfile] = {}

    def profile(owner):
        if owner.username not in profiles:
            profiles[owner.username] = HardwareProfile.objects.create(
                owner=owner, name="box", architecture="x86_64"
            )
        return profiles[owner.username]

    nodes = {}
    for hostname, fields in spec.get("nodes", {}).items():
        owner = users.get(username=fields["owner"])
        nodes[hostname] = Node.objects.create(
            owner=owner,
            hostname=hostname,
            address=fields.get("address", ""),
            shared=fields.get("shared", False),
            profile=profile(owner),
        )
    for fields in spec.get("testbeds", []):
        testbed = Testbed.objects.create(
            owner=users.get(username=fields["owner"]),
            name=fields["name"],
            benchmark_dir=fields["benchmark_dir"],
            slurm_partition=fields.get("slurm_partition", ""),
        )
        for hostname, roles in fields.get("members", {}).items():
            assert set(roles) <= set(ROLES), roles
            TestbedNode.objects.create(
                testbed=testbed, node=nodes[hostname], **dict.fromkeys(roles, True)
            )
        for target in fields.get("targets", []):
            Target.objects.create(
                testbed=testbed,
                node=nodes[target["node"]],
                kind="storage",
                raid_level="none",
                name=target["name"],
                path=target["path"],
            )


def launch(specs: list[list[str]]) -> list[int]:
    """Each ``[username, matrix YAML]`` made that user's matrix and launched, as the web page
    and the API launch them; the matrices' primary keys."""
    from django.contrib.auth import get_user_model

    from experiments.matrices import expansion
    from experiments.matrices.files import from_data, parse_yaml

    users = get_user_model().objects
    made = [from_data(parse_yaml(text), users.get(username=who)) for who, text in specs]
    for matrix in made:
        expansion.launch(matrix)
    return [matrix.pk for matrix in made]


def make(specs: list[list[str]]) -> list[int]:
    """Each ``[username, matrix YAML]`` made that user's matrix, not launched; their primary
    keys (``launch_again`` launches them)."""
    from django.contrib.auth import get_user_model

    from experiments.matrices.files import from_data, parse_yaml

    users = get_user_model().objects
    return [from_data(parse_yaml(text), users.get(username=who)).pk for who, text in specs]


def launch_again(matrices: list[int]) -> list[list]:
    """Launch each matrix as the Launch button does, again if it was launched before (a
    launch the broker refused leaves its runs planned; a second launch queues them):
    ``[pk, ""]`` when it launched, ``[pk, error]`` when it was refused."""
    from experiments.matrices import expansion
    from experiments.models import Matrix

    out: list[list] = []
    for pk in matrices:
        try:
            expansion.launch(Matrix.objects.get(pk=pk))
        except Exception as exc:  # the soak records why, and tries again later
            out.append([pk, f"{type(exc).__name__}: {exc}"])
        else:
            out.append([pk, ""])
    return out


def cancel(matrix: int | None = None) -> dict:
    """Cancel the runs of ``matrix`` (every run when None) as the Cancel button does; the
    counts cancel_runs returns."""
    from experiments.matrices import expansion
    from experiments.models import Run

    runs = Run.objects.all() if matrix is None else Run.objects.filter(matrix_id=matrix)
    return expansion.cancel_runs(runs)


def resume(matrix: int) -> int:
    """Send the matrix's queued runs again (the Resume button); how many were sent."""
    from experiments.matrices import expansion
    from experiments.models import Matrix

    return expansion.resume(Matrix.objects.get(pk=matrix))


def janitor(stale_seconds: float) -> dict:
    """One janitor sweep (what beat runs) with this staleness bound."""
    from experiments.execution.dispatch import janitor

    return janitor(stale_seconds)


def send_janitor() -> str:
    """The janitor task sent through the broker; its task id."""
    from experiments.execution.tasks import janitor

    return janitor.delay().id


def page(username: str, path: str) -> list:
    """``[status, html]`` of ``path`` fetched as ``username`` (signed in, over HTTPS)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    response = client.get(path, secure=True, follow=True)
    return [response.status_code, response.content.decode()]


def post(username: str, path: str, data: dict) -> list:
    """``[status, html, location]`` of a form POST to ``path`` as ``username`` (signed in,
    over HTTPS; redirects not followed)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    response = client.post(path, data, secure=True)
    return [response.status_code, response.content.decode(), response.get("Location", "")]


def matrix(username: str, text: str) -> str:
    """``username``'s matrix from YAML ``text``, saved and not launched; its UUID."""
    from django.contrib.auth import get_user_model

    from experiments.matrices.files import from_data, parse_yaml

    user = get_user_model().objects.get(username=username)
    return str(from_data(parse_yaml(text), user).uuid)


def metrics(run: int) -> list[dict]:
    """Every metric row of a run."""
    from experiments.models import Metric

    return list(
        Metric.objects.filter(run_id=run)
        .order_by("id")
        .values("name", "value", "unit", "stat", "iteration", "primary", "extra")
    )


def summary_differences() -> list[str]:
    """How the stored configuration summaries differ from a rebuild from the runs
    (``experiments.results.summaries.differences``): empty when they match."""
    from experiments.results import summaries

    return summaries.differences()


FUNCTIONS = {
    f.__name__: f
    for f in (
        inventory,
        launch,
        cancel,
        resume,
        janitor,
        send_janitor,
        page,
        metrics,
        post,
        matrix,
        summary_differences,
        make,
        launch_again,
    )
}
