#!/usr/bin/env bash
# Start two Celery workers beside gunicorn: one for the "default" queue (janitor, light
# tasks) and this node's benchmark worker on "node.<hostname>" (solo pool: one benchmark at a
# time, and a tool never outlives its worker), plus beat; stop all on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
# The node name the localhost testbed uses (Python's socket.gethostname()).
NODE=$("$VENV/bin/python" -c 'import socket; print(socket.gethostname())')
# Everything the embedded default writes (database, secret key, broker messages, logs, run
# directories) is readable by this user only.
umask 077
mkdir -p var

pids=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

"$VENV/bin/celery" -A beeweb worker --loglevel=INFO --concurrency=2 \
  -Q default -n "default@$NODE" >>var/worker.log 2>&1 &
pids+=($!)
"$VENV/bin/celery" -A beeweb worker --loglevel=INFO --pool=solo \
  -Q "node.$NODE" -n "node@$NODE" >>var/node-worker.log 2>&1 &
pids+=($!)
"$VENV/bin/celery" -A beeweb beat --loglevel=INFO >>var/beat.log 2>&1 &
pids+=($!)
echo "Celery workers and beat started (logs: var/worker.log, var/node-worker.log, var/beat.log)."
echo "Ctrl-C stops everything."
# The last thing of the start-up: a box with the address and how to sign in (the admin's
# password, the one time it is created), not lost among the lines above.
"$VENV/bin/python" manage.py ensure_admin --url "http://$HOST:$PORT/"
# This machine as the "localhost" testbed, owned by that admin (quiet: the box stays last).
"$VENV/bin/python" manage.py ensure_localhost >/dev/null
# Gunicorn's start-up lines would follow the box: only its warnings and the requests.
"$VENV/bin/gunicorn" beeweb.wsgi:application --bind "$HOST:$PORT" --workers 2 \
  --log-level warning --access-logfile - &
pids+=($!)
wait -n
