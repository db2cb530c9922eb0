"""A worker that loses Redis while it holds unacknowledged messages (acks_late) survives it
(beeweb/broker.py, ``RedisTransport``; the chaos soak found node workers dying of it): Celery
collects the lost connection (its transport forgets the connection) before it closes it, and
kombu's channel then looked for Redis through the forgotten connection (AttributeError, an
"Unrecoverable error" that stopped the worker). Here, on a redis-server of the test's own:
closing such a connection gives the message back once Redis answers again, and raises
nothing while it does not."""

from __future__ import annotations

import os
import shutil

import pytest
import redis as redis_client
from django.conf import settings
from kombu import Connection, Consumer, Producer, Queue

from tests.labs.servers import Redis

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)

TRANSPORT = "beeweb.broker:RedisTransport"


@pytest.fixture
def own_redis():
    server = Redis().start()
    try:
        yield server
    finally:
        server.close()


def _holding_one_unacked(url: str) -> Connection:
    """A connection whose channel took one message of queue "runs" and did not ack it."""
    connection = Connection(url, transport=TRANSPORT)
    channel = connection.default_channel
    queue = Queue("runs")
    Producer(channel).publish({"run": 1}, routing_key="runs", declare=[queue])
    taken = []
    Consumer(channel, [queue], callbacks=[lambda body, message: taken.append(body)]).consume()
    connection.drain_events(timeout=10)
    assert taken == [{"run": 1}]
    assert len(channel.qos._delivered) == 1
    return connection


def _lost(connection: Connection) -> None:
    """What Celery does with a connection it lost: collect it, then close it."""
    connection.collect(socket_timeout=0.1)


def test_a_lost_connection_closed_once_redis_is_back_gives_its_message_back(own_redis):
    connection = _holding_one_unacked(own_redis.url)
    client = redis_client.Redis.from_url(own_redis.url)
    # Redis stays up here (the connection was lost on the worker's side): the message
    # comes back to its queue.
    connection.transport.client = None  # what collect() leaves behind before close()
    connection.close()
    assert client.llen("runs") == 1


def test_a_lost_connection_closed_while_redis_is_down_raises_nothing(own_redis):
    connection = _holding_one_unacked(own_redis.url)
    own_redis.stop(kill=True)
    _lost(connection)
    connection.close()


@pytest.mark.skipif(
    not os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"),
    reason="the transport is chosen for a redis:// broker",
)
def test_a_redis_broker_uses_the_transport():
    assert settings.CELERY_BROKER_TRANSPORT == TRANSPORT
