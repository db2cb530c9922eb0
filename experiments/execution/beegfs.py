"""A tuning set's BeeGFS server keys made true on the servers a run holds, before its tool
starts, each server by its own worker (issue 26).

A run on a testbed holds the testbed's storage and metadata servers (``holding``). Their
``storage.*`` and ``meta.*`` keys live in the services' config files and take effect only
when the service restarts, which only the server's own node may decide: its worker's node
agent (``experiments.execution.agent``) answers under its node's policy
(``nodepolicy``: BEEWEB_NODE_BEEGFS, default false = refuse; the files and restart commands
are the node's own settings, never the database's).

The protocol is the cache drop's (on the lease, so it goes with the run):

- the run writes ``beegfs_request`` ({scope: {key: value}}, checked and rendered by
  ``tuning_keys.service_values``) on the leases of its servers whose tuning has keys for
  them, or whose config beeweb changed and has not restored yet (a run without keys must
  meet the original files); its own node, when it is a server, is done in-process;
- each node's agent answers (``BeegfsTuning``): refused by policy, or the keys written
  (the original kept as ``<conf>.beeweb-original``), the service restarted, Online awaited
  and the values read back from the daemon (``runners.beegfs_config``), per key before,
  asked and in force, with the restart and wait durations; nothing restarted when the file
  already says what is asked and the daemon started after it was written;
- the run waits (heartbeats, cancel), records every answer in
  ``effective_config["beegfs"][hostname]`` and fails before its tool starts unless every
  asked value is in force.

The original file comes back, restarted and awaited again, when nothing needs the change
any more: the node is not held and its matrix (if any) has no queued or running run left
(it ended, was cancelled, or the janitor ended the runs of a dead worker); and when the
node's worker starts and finds the change recorded in its state file. Every change and
restore is a ``BeegfsConfigChange`` row, shown on the matrix page.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from experiments.execution import holding, nodepolicy
from experiments.execution.answers import await_answers
from experiments.models import BeegfsConfigChange, Node, NodeLease, Run, TestbedNode
from experiments.shared import clock, prepared, tuning_keys
from runners import beegfs_config as bc

log = logging.getLogger(__name__)

ANSWER_SECONDS = bc.RESTART_TIMEOUT_S + bc.ONLINE_TIMEOUT_S + 60.0
RESTORE_CHECK_SECONDS = 5.0
IN_FORCE = "in force"
ROLES = {"storage": "storage", "meta": "metadata"}
# One change at a time per worker process: the executor (its own node) and the agent thread.
_lock = threading.Lock()


# --- The node's side ----------------------------------------------------------------------


def _state_path(hostname: str, scope: str) -> Path:
    """The node's record of a change in place (in the worker's private data directory)."""
    return Path(settings.DATA_DIR) / "beegfs-config" / f"{hostname}-{scope}.json"


def _read_state(hostname: str, scope: str) -> dict[str, Any] | None:
    try:
        return json.loads(_state_path(hostname, scope).read_text())
    except (OSError, ValueError):
        return None


def _write_state(hostname: str, scope: str, state: dict[str, Any]) -> None:
    path = _state_path(hostname, scope)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def service(policy: nodepolicy.NodePolicy, scope: str) -> bc.Service:
    conf, restart, name = policy.beegfs_service(scope)
    return bc.Service(scope, Path(conf), restart, policy.beegfs_ctl, name)


def answer(hostname: str, request: dict[str, Any]) -> dict[str, Any]:
    """Make ``request`` true on this node (``hostname``) under its policy; the answer a run
    records: ``outcome`` (IN_FORCE, refused…, failed…) and per service what was done."""
    policy = nodepolicy.current()
    asked: dict[str, dict[str, str]] = {
        scope: dict(values) for scope, values in (request.get("values") or {}).items() if values
    }
    scopes = sorted(
        set(asked) | {s for s in tuning_keys.SERVICE_SCOPES if _read_state(hostname, s)}
    )
    if not scopes:
        return {"outcome": IN_FORCE, "services": {}}
    if not policy.beegfs:
        return {"outcome": nodepolicy.BEEGFS_REFUSED, "services": {}}
    # The node checks the keys itself: a server (or a forged request) cannot make it write
    # a key the list refuses or a value of the wrong type.
    for scope, values in asked.items():
        checked, errors = tuning_keys.service_values({f"{scope}.{k}": v for k, v in values.items()})
        if errors:
            return {"outcome": "refused: " + "; ".join(errors), "services": {}}
        asked[scope] = checked.get(scope, {})
    services: dict[str, Any] = {}
    outcome = IN_FORCE
    with _lock:
        for scope in scopes:
            try:
                record = apply(hostname, service(policy, scope), asked.get(scope, {}), request)
            except (bc.BeegfsConfigError, OSError) as exc:
                record = {"error": str(exc)}
            services[scope] = record
            if record.get("error") and outcome == IN_FORCE:
                outcome = f"failed: {scope} service: {record['error']}"
    return {"outcome": outcome, "services": services}


def apply(
    hostname: str, svc: bc.Service, asked: dict[str, str], request: dict[str, Any]
) -> dict[str, Any]:
    """Bring ``svc``'s config file to the original with ``asked`` written into it (the
    original itself when nothing is asked), restart only when the file changes, read back.
    A record: node id, per key before/asked/in force, restarted, durations, error."""
    current = svc.conf.read_text()
    original = svc.original.read_text() if svc.original.exists() else current
    desired = bc.rewrite(original, asked) if asked else original
    before = bc.conf_values(original)
    record: dict[str, Any] = {"conf": str(svc.conf), "restarted": False}
    nid = bc.node_id(svc)
    record["node_id"] = nid
    state = _read_state(hostname, svc.scope)
    if desired != current:
        if desired == original:
            _restore(hostname, svc, state, nid, record)
        else:
            bc.save_original(svc)
            pending = {
                "conf": str(svc.conf),
                "change": (state or {}).get("change"),
                "matrix": request.get("matrix"),
                "run": request.get("run"),
                "tuning_set": request.get("tuning_set", ""),
                "values": asked,
            }
            # Recorded before the file changes: whatever happens next, this node knows it
            # has an original to put back.
            _write_state(hostname, svc.scope, pending)
            bc.write_conf(svc, desired)
            try:
                _restart_and_wait(svc, nid, record)
            except (bc.BeegfsConfigError, OSError) as exc:
                # A value the daemon does not start with must not leave the server down.
                record["error"] = f"{exc}; {_roll_back(hostname, svc, pending, nid)}"
                return record
            change = _record_change(hostname, svc, state, asked, before, record, request)
            _write_state(hostname, svc.scope, {**pending, "change": change.pk})
    elif not asked and state is not None:
        # Recorded as changed, yet the file is the original already (put back by hand):
        # nothing to restart; the record says so.
        svc.original.unlink(missing_ok=True)
        if state.get("change"):
            BeegfsConfigChange.objects.filter(pk=state["change"]).update(
                restored_at=clock.now(), restore_outcome="found the original file in place"
            )
        _state_path(hostname, svc.scope).unlink(missing_ok=True)
    elif state is not None and (state.get("matrix"), state.get("run")) != (
        request.get("matrix"),
        request.get("run"),
    ):
        # Unchanged, now for this run: the restore waits for this run's matrix instead.
        _write_state(
            hostname,
            svc.scope,
            {**state, "matrix": request.get("matrix"), "run": request.get("run")},
        )
    _read_back(svc, nid, asked, before, record)
    return record


def _restart_and_wait(svc: bc.Service, nid: str, record: dict[str, Any]) -> None:
    record["restart_s"] = round(bc.restart(svc), 3)
    record["restarted"] = True
    record["online_s"] = round(bc.wait_online(svc, nid), 3)


def _roll_back(hostname: str, svc: bc.Service, state: dict[str, Any], nid: str) -> str:
    """After a failed restart: the original file back, the service restarted and awaited;
    what happened, in words for the run's error."""
    record: dict[str, Any] = {}
    try:
        _restore(hostname, svc, state, nid, record)
    except (bc.BeegfsConfigError, OSError) as exc:
        return f"putting the original file back failed too: {exc}"
    return (
        f"the original file was put back and the {svc.scope} service restarted "
        f"({record.get('restart_s')} s, Online after {record.get('online_s')} s)"
    )


def _read_back(
    svc: bc.Service,
    nid: str,
    asked: dict[str, str],
    before: dict[str, str],
    record: dict[str, Any],
) -> None:
    """What the running daemon uses: its config file's text as the daemon reports it
    (getcfg) and whether the daemon reading it started after the file was last written."""
    in_force = bc.getcfg(svc, nid)
    keys = []
    wrong = []
    for key, value in sorted(asked.items()):
        now = in_force.get(key)
        keys.append({"key": key, "before": before.get(key), "asked": value, "in_force": now})
        if not tuning_keys.same_value(svc.scope, key, value, now):
            shown = "absent (the daemon's default)" if now is None else repr(now)
            wrong.append(f"{svc.scope}.{key} asked {value!r}, the daemon's file says {shown}")
    record["keys"] = keys
    if wrong:
        record["error"] = (
            "not in force: "
            + "; ".join(wrong)
            + f" (is {svc.conf} the file this daemon reads? getcfg of node {nid})"
        )
        return
    started = bc.daemon_started_after(svc, svc.conf.stat().st_mtime)
    if started is False:
        record["error"] = (
            f"not in force: the {svc.scope} daemon reading {svc.conf} started before the "
            f"file was last written (did {' '.join(svc.restart_argv)} restart it?)"
        )
    elif started is None:
        record["note"] = f"no process started with cfgFile={svc.conf} seen on this node"


def _record_change(
    hostname: str,
    svc: bc.Service,
    state: dict[str, Any] | None,
    asked: dict[str, str],
    before: dict[str, str],
    record: dict[str, Any],
    request: dict[str, Any],
) -> BeegfsConfigChange:
    now = clock.now()
    if state and state.get("change"):
        BeegfsConfigChange.objects.filter(pk=state["change"], restored_at__isnull=True).update(
            restored_at=now, restore_outcome="replaced by the next tuning set's values"
        )
    return BeegfsConfigChange.objects.create(
        hostname=hostname,
        service=svc.scope,
        conf=str(svc.conf),
        matrix_id=request.get("matrix"),
        run_id=request.get("run"),
        tuning_set=str(request.get("tuning_set", ""))[:200],
        before={key: before.get(key) for key in asked},
        after=asked,
        applied_at=now,
        restart_s=record.get("restart_s"),
        online_s=record.get("online_s"),
        outcome="written, restarted, Online",
    )


def _restore(
    hostname: str,
    svc: bc.Service,
    state: dict[str, Any] | None,
    nid: str,
    record: dict[str, Any],
) -> None:
    """The original file back, the service restarted and awaited; the change row says so."""
    error = ""
    try:
        bc.restore_original(svc)
        _restart_and_wait(svc, nid, record)
    except (bc.BeegfsConfigError, OSError) as exc:
        error = str(exc)
        raise
    finally:
        if state and state.get("change"):
            outcome = (
                f"failed: {error}"
                if error
                else f"restored: original file back, restarted in {record.get('restart_s')} s, "
                f"Online after {record.get('online_s')} s"
            )
            BeegfsConfigChange.objects.filter(pk=state["change"]).update(
                restored_at=clock.now(), restore_outcome=outcome
            )
        if not error:
            _state_path(hostname, svc.scope).unlink(missing_ok=True)
    log.info("BeeGFS %s config of %s restored (%s)", svc.scope, hostname, svc.conf)


def restore(hostname: str, scope: str) -> dict[str, Any] | None:
    """Put back the original config of this node's ``scope`` service if beeweb changed it;
    the record, or None when there was nothing to restore."""
    state = _read_state(hostname, scope)
    if state is None:
        return None
    policy = nodepolicy.current()
    if not policy.beegfs:
        log.warning(
            "BeeGFS %s config of %s was changed by beeweb but %s is false now: not restored",
            scope,
            hostname,
            nodepolicy.BEEGFS_VAR,
        )
        return None
    svc = service(policy, scope)
    record: dict[str, Any] = {"conf": str(svc.conf), "restarted": False}
    with _lock:
        if not svc.original.exists():
            _state_path(hostname, scope).unlink(missing_ok=True)
            return None
        _restore(hostname, svc, state, bc.node_id(svc), record)
    return record


def still_needed(state: dict[str, Any]) -> bool:
    """Whether a change may still be wanted: its matrix has queued or running runs."""
    if not state.get("matrix"):
        return False
    return Run.objects.filter(
        matrix_id=state["matrix"], status__in=(Run.Status.QUEUED, Run.Status.RUNNING)
    ).exists()


class BeegfsTuning:
    """The agent's job: answer BeeGFS requests on this node's leases; restore a change
    nothing needs any more (checked every RESTORE_CHECK_SECONDS while one is in place, and
    at the first tick: a worker that starts restores what its predecessor left)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.checked = 0.0
        self.started = False

    def tick(self, leases: list[NodeLease]) -> None:
        for lease in leases:
            if lease.beegfs_request is None or lease.beegfs_result is not None:
                continue
            try:
                result = answer(lease.hostname, lease.beegfs_request)
            except Exception as exc:  # an answer, whatever happened: the run waits for one
                log.exception("BeeGFS config on %s failed", lease.hostname)
                result = {"outcome": f"failed: {exc}", "services": {}}
            NodeLease.objects.filter(
                pk=lease.pk, run_id=lease.run_id, attempt=lease.attempt, beegfs_result__isnull=True
            ).update(beegfs_result=result)
            log.info(
                "node agent: BeeGFS config of %s: %s (run %s)",
                lease.hostname,
                result["outcome"],
                lease.run_id,
            )
        now = time.monotonic()
        if self.started and now - self.checked < RESTORE_CHECK_SECONDS:
            return
        self.checked = now
        first, self.started = not self.started, True
        held = {lease.hostname for lease in leases}
        for hostname in self.names:
            if hostname in held:
                continue
            for scope in tuning_keys.SERVICE_SCOPES:
                state = _read_state(hostname, scope)
                if state is None or (not first and still_needed(state)):
                    continue
                try:
                    restore(hostname, scope)
                except Exception:
                    log.exception("BeeGFS %s config of %s: restore failed", scope, hostname)


# --- The run's side -----------------------------------------------------------------------


def roles(run: Run) -> dict[str, tuple[list[str], bool]]:
    """The held servers of the run's testbed: {hostname: (its services, whether beeweb
    changed a config of it that is not restored yet)}, in one plain query (every run asks
    it before its tool starts: the ORM compiled its join and subquery on every run, ~1 ms of
    CPU)."""
    held = list(run.nodes_held or [])
    if not held:
        return {}
    # Read with the nodes' locks as the attempt took them (the claim), usually.
    kept = holding.server_roles(run, held)
    if kept is not None:
        return kept
    member = TestbedNode._meta.db_table
    node = Node._meta.db_table
    change = BeegfsConfigChange._meta.db_table
    placeholders = ", ".join(["%s"] * len(held))
    sql = (
        f'SELECT n.hostname, m.storage, m.metadata, EXISTS(SELECT 1 FROM "{change}" c '
        "WHERE c.hostname = n.hostname AND c.restored_at IS NULL) "
        f'FROM "{member}" m INNER JOIN "{node}" n ON n.id = m.node_id '
        f"WHERE m.testbed_id = %s AND n.hostname IN ({placeholders}) "
        "AND (m.storage OR m.metadata) ORDER BY n.hostname"
    )
    with prepared.cursor() as cursor:
        cursor.execute(sql, [run.testbed_id, *held])
        rows = cursor.fetchall()
    out: dict[str, tuple[list[str], bool]] = {}
    for hostname, storage, metadata, was_changed in rows:
        scopes = (["storage"] if storage else []) + (["meta"] if metadata else [])
        out[hostname] = (scopes, bool(was_changed))
    return out


def prepare(
    run: Run,
    tuning: dict[str, Any],
    own: str,
    beat: Callable[[], bool],
    live: Callable[[list[str]], set[str]],
    poll: float = 0.1,
) -> tuple[dict[str, Any] | None, str]:
    """Make ``tuning``'s server keys true on the servers this attempt holds (and the
    original files on those beeweb changed for another run); (record by hostname or None
    when nothing was asked, error). The error is "" when every asked value is in force,
    "cancelled" when ``beat()`` said stop. ``live(names)``: those of the nodes whose worker
    runs a node agent (``agent.with_agents``)."""
    if not run.nodes_held:
        return None, ""
    values, errors = tuning_keys.service_values(tuning)
    if errors:
        return None, "the tuning set's BeeGFS keys cannot be written: " + "; ".join(errors)
    # No server held (none in the testbed, or its storage is independent): nothing to do.
    servers = roles(run)
    if not servers:
        return None, ""
    requests: dict[str, dict[str, Any]] = {}
    for hostname, (scopes, changed) in servers.items():
        mine = {scope: values[scope] for scope in scopes if values.get(scope)}
        if mine or changed:
            requests[hostname] = {
                "values": mine,
                "matrix": run.matrix_id,
                "run": run.pk,
                "tuning_set": run.tuning_set.name if run.tuning_set_id else "",
            }
    if not requests:
        return None, ""
    others = sorted(set(requests) - {own})
    outcomes: dict[str, Any] = {}
    if others:
        for hostname in others:
            NodeLease.objects.filter(run_id=run.pk, attempt=run.attempts, hostname=hostname).update(
                beegfs_request=requests[hostname], beegfs_result=None
            )
        alive = live(others)
        for hostname in others:
            if hostname not in alive:
                outcomes[hostname] = {
                    "outcome": f"no answer: no beeweb worker with a node agent runs on {hostname}"
                }
    if own in requests:
        try:
            outcomes[own] = answer(own, requests[own])
        except Exception as exc:
            log.exception("BeeGFS config of %s failed", own)
            outcomes[own] = {"outcome": f"failed: {exc}", "services": {}}
    answers, cancelled = await_answers(
        {name for name in others if name not in outcomes},
        lambda pending: NodeLease.objects.filter(
            run_id=run.pk, attempt=run.attempts, hostname__in=pending, beegfs_result__isnull=False
        ).values_list("hostname", "beegfs_result"),
        beat,
        ANSWER_SECONDS,
        lambda hostname: {
            "outcome": f"no answer from {hostname}'s worker within {ANSWER_SECONDS:g} s"
        },
        poll,
    )
    outcomes.update(answers)
    if cancelled:
        return dict(sorted(outcomes.items())), "cancelled"
    failed = [
        f"{hostname}: {result.get('outcome')}"
        for hostname, result in sorted(outcomes.items())
        if result.get("outcome") != IN_FORCE
    ]
    error = ""
    if failed:
        error = "the tuning set's BeeGFS server settings are not in force: " + "; ".join(failed)
    return dict(sorted(outcomes.items())), error
