"""Node requests: a question for one node, answered by that node's agent, not its queue.

The server stores a ``NodeRequest`` (``ask``); the node agent of every worker that serves
``node.<hostname>`` (``experiments.execution.agent``) runs the ``NodeRequests`` job, which
takes the requests for its own nodes at its next poll, answers them under the node's own
policy and writes the answer. The node's solo worker may be busy with a benchmark meanwhile:
the agent is a thread beside it, so the answer does not wait for the run.

What a kind does is fixed here, on the node's side (``HANDLERS``): a request's ``params`` are
choices the handler validates, never text that reaches an argv. Kinds:

``beegfs-topology``
    The read-only beegfs-ctl listings of ``runners.beegfs_topology`` with the node's own
    beegfs-ctl prefix (``BEEWEB_BEEGFS_CTL``); no params. The answer holds each listing's
    stdout, stderr and exit status.

``ask`` waits for the answer up to a timeout and says clearly why there is none: no worker
with a live agent serves the node (offline, or a worker older than node requests), or the
node took the request and did not answer in time. A request nobody took by then is closed
(an agent starting later does not answer a question nobody waits for any more); requests
older than REQUEST_TTL are never taken.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from experiments.models import NodeRequest, Worker
from experiments.shared import clock
from runners import beegfs_ctl, beegfs_topology
from runners.launch import queue_for

log = logging.getLogger(__name__)

REQUEST_TTL = timedelta(seconds=120)  # an agent takes no request older than this
# How often an agent looks for requests (seconds): at most one query per this, beside the
# agent's poll of its leases every 0.25-0.5 s, which stays the one query of most polls.
CHECK_SECONDS = 1.0
KEEP = timedelta(days=7)  # answered requests are deleted after this (a new ask tidies)
DEFAULT_TIMEOUT = 45.0  # seconds a user's import waits for the node
POLL = 0.1
# As experiments.execution.agent.ALIVE_SECONDS (which imports this module for its job): an
# agent not seen for this long is taken for gone.
ALIVE_SECONDS = 15.0


class NodeRequestError(Exception):
    """No answer, or the node answered with an error: the message says which, for the user."""

    def __init__(self, message: str, request: NodeRequest | None = None):
        super().__init__(message)
        self.message = message
        self.request = request


# --- The node's side ----------------------------------------------------------------------


def beegfs_topology_answer(params: dict[str, Any]) -> dict[str, Any]:
    """``beegfs-topology``: the fixed read-only listings, with this node's beegfs-ctl."""
    if params:
        raise ValueError(f"beegfs-topology takes no parameters (got {', '.join(sorted(params))})")
    return beegfs_topology.collect(beegfs_ctl.ctl_prefix())


HANDLERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    NodeRequest.Kind.BEEGFS_TOPOLOGY: beegfs_topology_answer,
}


class NodeRequests:
    """Agent job: answer the pending requests for this worker's nodes, one at a time.

    Taken first (``taken_at``, only if nobody did: two workers of one node answer once),
    then answered; an answer is written only to a request still open, so a request the server
    closed meanwhile (its wait ended) keeps the server's words."""

    def __init__(self, names: list[str], worker: str = ""):
        self.names = names
        self.worker = worker
        self.checked = -CHECK_SECONDS

    def tick(self, leases) -> None:
        now = time.monotonic()
        if now - self.checked < CHECK_SECONDS:
            return
        self.checked = now
        since = clock.now() - REQUEST_TTL
        pending = list(
            NodeRequest.objects.filter(
                hostname__in=self.names,
                answered_at__isnull=True,
                taken_at__isnull=True,
                created_at__gte=since,
            ).order_by("created_at", "pk")[:5]
        )
        for request in pending:
            taken = NodeRequest.objects.filter(
                pk=request.pk, answered_at__isnull=True, taken_at__isnull=True
            ).update(taken_at=clock.now(), taken_by=self.worker[:255])
            if taken:
                self.answer(request)

    def answer(self, request: NodeRequest) -> None:
        handler = HANDLERS.get(request.kind)
        result, error = None, ""
        if handler is None:
            error = f"this node's worker does not know requests of kind {request.kind!r}"
        else:
            try:
                result = handler(request.params or {})
            except ValueError as exc:  # refused: the request or the node's setting is wrong
                error = str(exc)
            except Exception as exc:  # an answer, whatever happened: the server waits for one
                log.exception("node request %s on %s failed", request.kind, request.hostname)
                error = f"{type(exc).__name__}: {exc}"
        NodeRequest.objects.filter(pk=request.pk, answered_at__isnull=True).update(
            answered_at=clock.now(), result=result, error=error
        )
        log.info("node agent: %s of %s: %s", request.kind, request.hostname, error or "answered")


# --- The server's side --------------------------------------------------------------------


def ask(
    hostname: str,
    kind: str,
    params: dict[str, Any] | None = None,
    *,
    user=None,
    timeout: float = DEFAULT_TIMEOUT,
) -> NodeRequest:
    """Ask ``hostname``'s agent and wait for its answer; the answered request, or
    NodeRequestError saying why there is none (or what the node said went wrong)."""
    if kind not in NodeRequest.Kind.values:
        raise NodeRequestError(f"unknown node request kind {kind!r}")
    NodeRequest.objects.filter(created_at__lt=clock.now() - KEEP).delete()
    request = NodeRequest.objects.create(
        hostname=hostname,
        kind=kind,
        params=params or {},
        requested_by=user if user is not None and user.is_authenticated else None,
    )
    if not agent_alive(hostname):
        # Not worth waiting for: nobody polls for this node. Closed at once.
        _close(
            request,
            f"no beeweb worker with a node agent runs on {hostname} (the node is offline, "
            "its worker is stopped, or it is a worker older than node requests)",
        )
        raise NodeRequestError(request.error, request)
    started = time.monotonic()
    while True:
        request.refresh_from_db()
        if request.answered_at is not None:
            break
        if time.monotonic() - started >= timeout:
            if request.taken_at is None:
                message = (
                    f"no answer from {hostname}'s worker within {timeout:g} s: its node agent "
                    "did not take the request (a worker older than node requests, or one "
                    "that stopped)"
                )
            else:
                message = (
                    f"{hostname}'s worker took the request but did not answer within {timeout:g} s"
                )
            _close(request, message)
            request.refresh_from_db()
            break
        time.sleep(POLL)
    if request.error:
        raise NodeRequestError(request.error, request)
    return request


def agent_alive(hostname: str) -> bool:
    """Whether a worker serving ``node.<hostname>`` has a node agent seen recently."""
    since = clock.now() - timedelta(seconds=ALIVE_SECONDS)
    queue = queue_for(hostname)
    return any(
        queue in (queues or [])
        for queues in Worker.objects.filter(agent_seen__gte=since).values_list("queues", flat=True)
    )


def _close(request: NodeRequest, message: str) -> None:
    NodeRequest.objects.filter(pk=request.pk, answered_at__isnull=True).update(
        answered_at=clock.now(), error=message
    )
    request.refresh_from_db()
