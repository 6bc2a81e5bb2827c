"""`polled_health`: an upstream is up from its first 200, down at once when it refuses
connections, and down only after `FAILED_POLLS_TO_DOWN` other failed polls in a row (an
engine busy with a large request answers late, it is not gone).

Against a small upstream of the test's own that answers each ``/health`` with the next
status of a script."""

from __future__ import annotations

import asyncio
import contextlib

from prefixkit.engine_adapter.serving.router import FAILED_POLLS_TO_DOWN, polled_health
from prefixkit.engine_adapter.serving.upstream import UpstreamPools


async def _recorded(statuses: list[int], stop_serving_after: int | None = None) -> list[bool]:
    """What `polled_health` records over one poll per scripted status (polls 10 ms apart);
    with `stop_serving_after`, the upstream stops listening after that many answers."""
    script = list(statuses)
    answered = asyncio.Event()
    server: asyncio.Server

    served: set[asyncio.StreamWriter] = set()  # connections not yet closed

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.add(writer)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                if not script:  # played out: the connection closes unanswered
                    return
                status = script.pop(0)
                writer.write(b"HTTP/1.1 %d X\r\ncontent-length: 0\r\n\r\n" % status)
                await writer.drain()
                answers = len(statuses) - len(script)
                if answers == stop_serving_after:
                    server.close()
                    answered.set()
                    return
                if not script:
                    answered.set()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            served.discard(writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    records: list[bool] = []
    polls = UpstreamPools()
    try:
        async with polled_health([url], polls, 0.01, lambda _, ok: records.append(ok)):
            await asyncio.wait_for(answered.wait(), 5.0)
            await asyncio.sleep(0.1)  # the polls that follow
    finally:
        polls.close()  # every connection of the polls aborted: each handler sees its end
        # a poll's connection the kernel accepted just before it was aborted is taken while
        # the server still listens: Python 3.11 leaves a connection it accepts after the
        # server closed unclosed (`_accept_connection2`: `Server._attach` fails on it)
        await asyncio.sleep(0.05)
        server.close()
        async with asyncio.timeout(5.0):
            while served:
                await asyncio.sleep(0.001)
        await server.wait_closed()
    return records


def test_an_upstream_is_up_from_its_first_200() -> None:
    assert asyncio.run(_recorded([200]))[:1] == [True]


def test_an_upstream_failing_fewer_polls_in_a_row_than_the_threshold_stays_up() -> None:
    script = [200, *[503] * (FAILED_POLLS_TO_DOWN - 1), 200]
    records = asyncio.run(_recorded(script))
    assert records[:2] == [True, True]


def test_an_upstream_failing_the_threshold_of_polls_in_a_row_is_down() -> None:
    script = [200, *[503] * FAILED_POLLS_TO_DOWN, 200]
    records = asyncio.run(_recorded(script))
    assert records[:3] == [True, False, True]


def test_an_upstream_that_refuses_connections_is_down_at_the_next_poll() -> None:
    records = asyncio.run(_recorded([200, 200], stop_serving_after=1))
    assert records[:2] == [True, False]
