"""beeweb-push: upload benchmark output files to beeweb from any node, no worker needed.

    beeweb-push --url https://beeweb.example.org --token KEY --testbed NAME \\
        [--tuning NAME] [--tool fio] [--op write] [--key K] [--label TEXT]
        [--telemetry JSON] FILE...

The URL and token may come from BEEWEB_URL and BEEWEB_TOKEN instead. Each file becomes one
run: the server stores the raw text first, then parses it (the tool is detected when --tool
is not given); a file it cannot parse is still kept, with the parse error, and reported here.
A file of several independent measurements (fio jobs in different stonewall groups, an IOR
or mdtest log of several runs) is sent whole and becomes one run per measurement, each
listed here.
``--telemetry`` sends the run's telemetry with it (one file only; docs/telemetry.md).

Every upload carries an idempotency key (--key, or the SHA-256 of the file's content), so
pushing the same file twice, or a retry after a lost answer, never creates a second run.
Connection errors and 5xx answers are retried with back-off; anything else fails at once.

Files go up in batches within the server's limits per request (MAX_BATCH_FILES files,
MAX_BATCH_BYTES of JSON: the defaults of beeweb's bulk API, which a server can only
lower or raise by configuration). A batch the server still finds too large (HTTP 413) is split
in two and sent again; a single file above the limit is reported and skipped.
Exit status: 0 when every file is stored, 1 on failure with one line saying why.

Python's standard library only, so it runs on cluster nodes without Django: copy this one
file there, or install beeweb (console script ``beeweb-push``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# beeweb's bulk API refuses more per request (experiments/results/ingest.py, README's API section).
MAX_BATCH_BYTES = 2 * 1024 * 1024
MAX_BATCH_FILES = 500
USER_AGENT = "beeweb-push/1"


class PushError(Exception):
    """A failure worth one line to the user."""


class TooLarge(PushError):
    """The server refused a request as too large (HTTP 413)."""


def build_items(args: argparse.Namespace) -> list[tuple[str, dict]]:
    items = []
    for name in args.files:
        path = Path(name)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PushError(f"cannot read {name}: {exc.strerror or exc}") from None
        text = data.decode("utf-8", errors="replace").replace("\x00", "")
        if not text.strip():
            raise PushError(f"{name} is empty")
        if args.key:
            key = args.key if len(args.files) == 1 else f"{args.key}:{path.name}"
        else:
            key = "sha256:" + hashlib.sha256(data).hexdigest()
        item = {
            "testbed": args.testbed,
            "raw_output": text,
            "key": key,
            "label": (args.label or path.name)[:200],
        }
        if args.tuning:
            item["tuning_set"] = args.tuning
        if args.tool:
            item["tool"] = args.tool
        if args.op:
            item["op"] = args.op
        # getattr: callers that build their own Namespace (tests, scripts) may leave it out.
        if getattr(args, "telemetry", None):
            item["telemetry"] = read_telemetry(args.telemetry)
        items.append((name, item))
    return items


def read_telemetry(name: str) -> list:
    """The run's telemetry file: one beeweb-telemetry/1 document (one node) or a JSON list
    of them (docs/telemetry.md). The server validates it; here only that it is JSON of
    that shape, so that a wrong file fails before anything is sent."""
    try:
        value = json.loads(Path(name).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PushError(f"cannot read {name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PushError(f"{name} is not JSON: {exc}") from None
    docs = value if isinstance(value, list) else [value]
    if not docs or not all(
        isinstance(d, dict) and d.get("format") == "beeweb-telemetry/1" for d in docs
    ):
        raise PushError(f"{name}: not beeweb-telemetry/1 documents (see docs/telemetry.md)")
    return docs


def encoded_size(item: dict) -> int:
    """Bytes of ``item`` in the request body, as ``post`` encodes it (plus a separator)."""
    return len(json.dumps(item).encode("utf-8")) + 2


def batches(items: list[tuple[str, dict]], max_bytes: int = MAX_BATCH_BYTES):
    """Consecutive batches of at most MAX_BATCH_FILES items and ``max_bytes`` of JSON; an
    item larger than that alone goes in a batch of its own (the server says why it is
    refused)."""
    batch, size = [], 2
    for name, item in items:
        length = encoded_size(item)
        if batch and (size + length > max_bytes or len(batch) >= MAX_BATCH_FILES):
            yield batch
            batch, size = [], 2
        batch.append((name, item))
        size += length
    if batch:
        yield batch


def _detail(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip().splitlines()[0][:200] if body else ""
    if isinstance(data, dict):
        if "detail" in data:
            return str(data["detail"])
        return "; ".join(f"{k}: {v}" for k, v in data.items())[:300]
    return str(data)[:300]


def post(
    url: str,
    token: str,
    payload: list[dict],
    *,
    retries: int,
    timeout: float,
    context: ssl.SSLContext | None,
    sleep=time.sleep,
) -> dict:
    """POST ``payload`` as JSON; retry on connection errors and 5xx with back-off."""
    body = json.dumps(payload).encode("utf-8")
    delay = 1.0
    for attempt in range(retries + 1):
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Authorization": f"Token {token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            detail = _detail(exc.read())
            if exc.code == 413:
                raise TooLarge(f"too large for one request (HTTP 413): {detail}") from None
            if exc.code < 500:
                reason = {
                    401: "the server refused the token",
                    403: "not allowed",
                    404: "no beeweb API at this URL",
                }.get(exc.code, "request refused")
                raise PushError(
                    f"{reason} (HTTP {exc.code}): {detail}"
                    if detail
                    else f"{reason} (HTTP {exc.code})"
                ) from None
            error = f"server error (HTTP {exc.code}): {detail}"
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            error = f"cannot reach {url}: {reason}"
        except ValueError:
            raise PushError(f"the server at {url} did not answer with JSON") from None
        if attempt < retries:
            print(f"beeweb-push: {error}; retrying in {delay:.0f} s", file=sys.stderr)
            sleep(delay)
            delay = min(delay * 2, 30.0)
    raise PushError(f"{error} (gave up after {retries + 1} attempts)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="beeweb-push",
        description="Upload benchmark output files to beeweb as runs of a testbed.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="raw tool output files")
    parser.add_argument(
        "--url",
        default=os.environ.get("BEEWEB_URL"),
        help="beeweb's address, e.g. https://beeweb.example.org (env BEEWEB_URL)",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("BEEWEB_TOKEN"),
        help="API token (env BEEWEB_TOKEN; see /api/token/)",
    )
    parser.add_argument("--testbed", required=True, help="testbed name or UUID")
    parser.add_argument("--tuning", help="tuning set name or UUID")
    parser.add_argument("--tool", help="tool that wrote the files (detected when omitted)")
    parser.add_argument("--op", help="parser option, e.g. IOR's write or read phase")
    parser.add_argument("--key", help="idempotency key (default: the file's SHA-256)")
    parser.add_argument("--label", help="run label (default: the file name)")
    parser.add_argument(
        "--telemetry",
        metavar="JSON",
        help="telemetry of the run (one FILE only): a beeweb-telemetry/1 document or a list",
    )
    parser.add_argument(
        "--retries", type=int, default=5, help="retries on connection errors and 5xx (default 5)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per request (default 120)"
    )
    parser.add_argument("--cacert", help="CA bundle to verify the server's certificate")
    parser.add_argument("-q", "--quiet", action="store_true", help="print failures only")
    args = parser.parse_args(argv)

    try:
        if not args.url:
            raise PushError("no server: give --url or set BEEWEB_URL")
        if not args.token:
            raise PushError(
                "no token: give --token or set BEEWEB_TOKEN "
                "(create one at /api/token/ or with manage.py api_token)"
            )
        if args.telemetry and len(args.files) > 1:
            raise PushError("--telemetry belongs to one run: give one FILE with it")
        if not args.url.startswith(("http://", "https://")):
            raise PushError(f"--url must start with https:// (or http://), got {args.url!r}")
        endpoint = args.url.rstrip("/") + "/api/runs/bulk/"
        context = None
        if endpoint.startswith("https://"):
            context = ssl.create_default_context(cafile=args.cacert)
        failures = 0
        pending = list(batches(build_items(args)))
        pending.reverse()
        while pending:
            batch = pending.pop()
            try:
                answer = post(
                    endpoint,
                    args.token,
                    [item for _, item in batch],
                    retries=max(0, args.retries),
                    timeout=args.timeout,
                    context=context,
                )
            except TooLarge as exc:
                if len(batch) == 1:
                    failures += 1
                    print(f"beeweb-push: {batch[0][0]}: {exc}", file=sys.stderr)
                else:  # the server's limits are lower than ours: halve and send again
                    half = len(batch) // 2
                    pending += [batch[half:], batch[:half]]
                continue
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list) or len(results) != len(batch):
                raise PushError("unexpected answer from the server")
            for (name, _), result in zip(batch, results, strict=True):
                state = result.get("status")
                if state == "invalid":
                    failures += 1
                    errors = "; ".join(f"{k}: {v}" for k, v in (result.get("errors") or {}).items())
                    print(f"beeweb-push: {name}: rejected: {errors}", file=sys.stderr)
                elif result.get("parse_error"):
                    print(
                        f"{name}: stored as run {result.get('uuid')}, but it could not be "
                        f"parsed: {result['parse_error']}",
                        file=sys.stderr,
                    )
                elif not args.quiet:
                    what = "already stored as" if state == "existing" else "stored as"
                    parts = result.get("parts")
                    if isinstance(parts, list) and len(parts) > 1:
                        # Several independent measurements (fio stonewall groups, an IOR
                        # log of several runs): the server stored a run of each.
                        print(f"{name}: {what} {len(parts)} runs: {result.get('held', '')}")
                        for part in parts:
                            metrics = f" ({part['metrics']} metrics)" if "metrics" in part else ""
                            print(f"  run {part.get('uuid')} [{part.get('label')}]{metrics}")
                        continue
                    metrics = f" ({result['metrics']} metrics)" if "metrics" in result else ""
                    print(f"{name}: {what} run {result.get('uuid')}{metrics}")
        if failures:
            raise PushError(f"{failures} of {len(args.files)} files were rejected")
    except PushError as exc:
        print(f"beeweb-push: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("beeweb-push: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
