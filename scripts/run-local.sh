#!/usr/bin/env bash
# Start a Celery worker (queues "default" and this node's "node.<hostname>") and beat beside
# gunicorn; stop all of them when any stops or on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
NODE=$(hostname -s 2>/dev/null || hostname)
mkdir -p var

pids=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

"$VENV/bin/celery" -A beeweb worker --loglevel=INFO --concurrency=2 \
  -Q "default,node.$NODE" -n "worker@$NODE" >>var/worker.log 2>&1 &
pids+=($!)
"$VENV/bin/celery" -A beeweb beat --loglevel=INFO >>var/beat.log 2>&1 &
pids+=($!)
echo "Celery worker and beat started (logs: var/worker.log, var/beat.log)."
echo "beeweb is at http://$HOST:$PORT/  (Ctrl-C stops everything)"
"$VENV/bin/gunicorn" beeweb.wsgi:application --bind "$HOST:$PORT" --workers 2 \
  --access-logfile - &
pids+=($!)
wait -n
