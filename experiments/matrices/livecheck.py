"""Before runs start: does each testbed's running cluster still look as stored?

A testbed with a live node (``Testbed.live_node``, set by an import from the live cluster)
is asked for its topology (a node request answered by that node's agent, bounded by
LIVE_CHECK_SECONDS) and compared with what is stored (``experiments.inventory.live``): a target
offline or out of sync, a target added, removed or moved, a server gone. Every way a user
starts runs asks first: a launch (page, API, ``manage.py launch_matrix``), "Re-run failed"
and "Resume" (of the testbeds whose runs they send). Runs start with differences, or with a
node that could not be asked, only when the user says so (the page's "Launch anyway", the
API's ``override_topology``, the command's ``--override-topology``), and the matrix records
it with the action (``ACTIONS``). Testbeds without a live node are not asked: nothing says
how to reach their cluster. The janitor's re-sending of lost messages and an adaptive cell's
next repetition start nothing the user has not started, and are not asked again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from experiments.execution.noderequests import NodeRequestError, ask
from experiments.inventory.live import LiveError, differences, read_answer
from experiments.matrices.launching import node_problem
from experiments.models import Matrix, Node, NodeRequest, Testbed, TestbedNode

# What started runs despite differences, as recorded on the matrix and shown on its page.
ACTIONS = {"launch": "launched", "rerun": "re-ran failed runs", "resume": "resumed"}


@dataclass
class LiveCheck:
    """One testbed's check: the node asked, what differs, or why it could not be asked."""

    testbed: Testbed
    node: str
    differences: list[str] = field(default_factory=list)
    problem: str = ""  # the node could not be asked, or its answer was unusable
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return not (self.differences or self.problem)

    def as_json(self) -> dict:
        return {
            "testbed": self.testbed.name,
            "testbed_uuid": str(self.testbed.uuid),
            "node": self.node,
            "differences": self.differences,
            "problem": self.problem,
        }


def live_node_choices(testbed: Testbed) -> list[Node]:
    """The nodes whose worker may be asked for this testbed's live topology: its members and
    the other nodes a run of it may use (its owner's, and shared ones; ``node_problem``),
    ordered with the likely management node first."""
    candidates = (
        Node.objects.filter(published=False, owner__isnull=False)
        .filter(Q(owner_id=testbed.owner_id) | Q(shared=True) | Q(memberships__testbed=testbed))
        .select_related("owner")
        .distinct()
    )
    roles = {
        m.node_id: m for m in TestbedNode.objects.filter(testbed=testbed).select_related("node")
    }

    def rank(node: Node) -> tuple:
        member = roles.get(node.pk)
        return (
            node.pk != testbed.live_node_id,
            not (member and member.management),
            not (member and member.metadata),
            member is None,
            node.hostname,
        )

    return sorted((n for n in candidates if node_problem(testbed, n) is None), key=rank)


def check_testbed(testbed: Testbed, user, timeout: float | None = None) -> LiveCheck | None:
    """The live check of one testbed, or None when it has no live node."""
    node = testbed.live_node
    if node is None:
        return None
    check = LiveCheck(testbed, node.hostname)
    refused = node_problem(testbed, node)
    if refused:
        check.problem = f"its live node cannot be asked: {refused}"
        return check
    wait = settings.LIVE_CHECK_SECONDS if timeout is None else timeout
    try:
        answer = ask(node.hostname, NodeRequest.Kind.BEEGFS_TOPOLOGY, user=user, timeout=wait)
        check.seconds = answer.round_trip
        check.differences = differences(testbed, read_answer(answer.result))
    except (NodeRequestError, LiveError) as exc:
        check.problem = f"{node.hostname} could not tell its live topology: {exc}"
    return check


def check_matrix(matrix: Matrix, user, timeout: float | None = None, runs=None) -> list[LiveCheck]:
    """The checks of every testbed of ``matrix`` that has a live node; only the failed ones.
    ``runs`` (a queryset of the matrix's runs about to be sent): only their testbeds."""
    testbeds = matrix.testbeds.select_related("live_node__owner", "owner").order_by("name")
    if runs is not None:
        testbeds = testbeds.filter(pk__in=runs.values("testbed_id"))
    checks = []
    for testbed in testbeds:
        check = check_testbed(testbed, user, timeout)
        if check is not None and not check.ok:
            checks.append(check)
    return checks


def record_override(matrix: Matrix, user, checks: list[LiveCheck], action: str = "launch") -> None:
    """The user started runs anyway (``action``, a key of ACTIONS): who, when, how and what
    they were shown, kept on the matrix."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    entry = {
        "at": timezone.now().isoformat(),
        "by": getattr(user, "username", "") or "",
        "action": action,
        "testbeds": [c.as_json() for c in checks],
    }
    Matrix.objects.filter(pk=matrix.pk).update(
        topology_overrides=[*(matrix.topology_overrides or []), entry][-50:]
    )
    matrix.refresh_from_db(fields=["topology_overrides"])
