"""The brokers' transports: the embedded default's (kombu's filesystem transport, taking
messages in the order they were sent) and Redis's (kombu's, whose channel survives being closed
after its connection, ``RedisTransport``).

kombu names each message file ``<monotonic milliseconds>_<uuid4>.<queue>.msg`` and a consumer
takes the first name in sorted order: messages sent within one millisecond (a launch sends a
matrix's runs in a loop, several per millisecond) were taken in the order of their random
uuids, so runs started out of the matrix's order (interleaved, or shuffled by its seed), which
``experiments.execution.dispatch`` sends them in. (The unpadded milliseconds also sort wrongly
when their number of digits grows, e.g. 9999999 after 10000000.) Here the name starts with a
fixed-width count of nanoseconds of the system-wide monotonic clock, strictly increasing
within a process, so a process's messages are taken in the order it sent them and messages of
different processes in the order of their sending time. The rest of the name (``_<uuid4>.
<queue>.msg``) is kombu's, so its consumers, counting and purging read these files as theirs.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, redis
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

_lock = threading.Lock()
_last = 0


def sequence() -> int:
    """Nanoseconds of the monotonic clock (shared by the machine's processes), strictly
    increasing within this process."""
    global _last
    with _lock:
        _last = max(_last + 1, time.monotonic_ns())
        return _last


def message_name(queue: str) -> str:
    """A message file's name for ``queue``: sorts after every name this process made before."""
    return f"{sequence():020d}_{uuid.uuid4()}.{queue}.msg"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue`` (kombu's, with an ordered file name)."""
        path = os.path.join(self.data_folder_out, message_name(queue))
        f = None
        try:
            f = open(path, "wb", buffering=0)  # noqa: SIM115 (kombu's lock needs the file)
            filesystem.lock(f, filesystem.LOCK_EX)
            f.write(str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {path!r} to directory") from exc
        finally:
            if f is not None:
                filesystem.unlock(f)
                f.close()


class Transport(filesystem.Transport):
    Channel = Channel


# --- Redis --------------------------------------------------------------------------------


class _Detached:
    """A transport whose connection was closed, seen by one of its channels: the transport's
    attributes, with the connection (``client``) the channel was opened by."""

    def __init__(self, transport, client):
        self._transport = transport
        self.client = client

    def __getattr__(self, name):
        return getattr(self._transport, name)


class RedisChannel(redis.Channel):
    """kombu's Redis channel, which remembers the connection it was opened by.

    When a worker loses the broker (Redis restarted), Celery collects the lost connection
    (``Connection.collect``: the transport forgets its connection) and then closes it, which
    closes its channel, which gives back the messages the worker took and had not acknowledged
    (``QoS.restore_unacked``, acks_late). kombu works out where Redis is from the transport's
    connection, gone by then: the close raised ``AttributeError: 'NoneType' object has no
    attribute 'hostname'``, which is no connection error, and the worker died ("Unrecoverable
    error"; the chaos soak, tests/soak, found it). Here the channel uses the connection it was
    opened by: the messages are given back when Redis answers, and when it does not, the
    close fails with Redis's connection error, which kombu ignores as it closes a lost
    connection (the janitor sends those runs again, ``RUN_REDISPATCH_SECONDS``)."""

    def __init__(self, connection, *args, **kwargs):
        self._opened_by = connection.client
        super().__init__(connection, *args, **kwargs)

    def _connparams(self, asynchronous=False):
        if self.connection.client is not None or self._opened_by is None:
            return super()._connparams(asynchronous)
        transport, self.connection = self.connection, _Detached(self.connection, self._opened_by)
        try:
            return super()._connparams(asynchronous)
        finally:
            self.connection = transport

    # (the pool, its client) of _create_client, outside the event loop.
    _pool_client: tuple | None = None

    def _create_client(self, asynchronous=False):
        """kombu makes a new redis client for every command it sends outside the event loop
        (``conn_or_acquire``): the bookkeeping of each unacknowledged message (acks_late), as
        it is delivered and as it is acknowledged, two per run, each copying the client's
        ~180 response callbacks (~0.3 ms of CPU). One client per connection pool instead: a
        redis client keeps no connection of its own (its pool lends one per command), and
        a channel that drops its pool (closed, or forked) gets a new client with the new
        pool."""
        if asynchronous:
            return super()._create_client(asynchronous)
        pool = self.pool
        cached = self._pool_client
        if cached is None or cached[0] is not pool:
            cached = self._pool_client = (pool, super()._create_client())
        return cached[1]


class RedisTransport(redis.Transport):
    """kombu's Redis transport with ``RedisChannel``."""

    Channel = RedisChannel
