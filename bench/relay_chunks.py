"""The serving app's CPU for each chunk of a streamed answer it relays, one request at a
time, measured on the server's own thread.

    .venv/bin/python bench/relay_chunks.py [--rounds 3] [--requests 100] [--baseline DIR]

An upstream of the bench's own (asyncio, in this process, its own thread) answers each
request with a chunked event stream: ``--chunks`` chunks (65 by default) 1 ms apart, each
a Completions event of about 100 bytes, so that every chunk is a read of its own. The
serving app (no tenants, `DirectRoute` to that upstream) runs on a uvicorn server in a
thread, as `prefixkit serve` runs it; httpx in the main thread streams `--requests`
answers one after another, then as many answers of one chunk. The server thread's CPU
clock, read before and after, gives its CPU per request for each; the difference over
the difference of chunks is its CPU per chunk, in microseconds (`--rounds` times).

``--baseline DIR`` measures the ``prefixkit`` package of another source tree
(``DIR/prefixkit/{engine_adapter,sdk,...}``, such as ``git archive`` of an earlier commit
unpacked there) right after this one, each round, in a process of its own, and prints
the two side by side with their ratio. Nothing here waits on another process: one
request in flight, the machine's other load aside, the numbers are the relay's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time

CHUNK = (
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m",'
    b'"choices":[{"index":0,"text":"ok","finish_reason":null}]}\n\n'
)
SERVER_THREAD = "relay-bench"


def serve_upstream(port: int, ready: threading.Event) -> None:
    """The upstream: ``POST .../N`` is answered with N chunks 1 ms apart; other requests
    (the app's health polls) with an empty 200."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.partition(b":")[2])
                await reader.readexactly(length)
                last = head.split(b" ")[1].rsplit(b"/", 1)[1]
                if not last.isdigit():
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for _ in range(int(last)):
                    await asyncio.sleep(0.001)
                    writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def main() -> None:
        await asyncio.start_server(answer, "127.0.0.1", port)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def server_cpu_s() -> float:
    """The server thread's CPU time so far."""
    for thread in threading.enumerate():
        if thread.name == SERVER_THREAD and thread.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    raise SystemExit(f"no thread named {SERVER_THREAD!r}")


def measure(chunks: int, requests: int) -> tuple[float, float]:
    """This process's package: the server's CPU per request (µs) for answers of one
    chunk and of `chunks` chunks."""
    import httpx
    from prefixkit.engine_adapter.serving.app import serving_app
    from prefixkit.engine_adapter.serving.keepalive import served_in_thread
    from prefixkit.engine_adapter.serving.router import DirectRoute
    from prefixkit.testing.fake_vllm import free_port

    port, ready = free_port(), threading.Event()
    threading.Thread(target=serve_upstream, args=(port, ready), daemon=True).start()
    ready.wait()
    url = f"http://127.0.0.1:{port}"
    app = serving_app(DirectRoute(url, [url], name="upstream"))
    with (
        served_in_thread(app, "127.0.0.1", free_port(), SERVER_THREAD) as router,
        httpx.Client(base_url=router) as client,
    ):

        def per_request_us(count: int) -> float:
            for _ in range(5):  # connections open, code paths warm
                client.post(f"/v1/completions/{count}", json={"stream": True}).read()
            start = server_cpu_s()
            for _ in range(requests):
                with client.stream("POST", f"/v1/completions/{count}", json={"stream": True}) as r:
                    for _ in r.iter_raw():
                        pass
            return (server_cpu_s() - start) / requests * 1e6

        return per_request_us(1), per_request_us(chunks)


def measured_in(source: str | None, chunks: int, requests: int) -> tuple[float, float]:
    """`measure` in a process of its own, with the ``prefixkit`` of `source` (None: this
    tree's)."""
    env = {**os.environ, "PYTHONPATH": source} if source else None
    command = [sys.executable, __file__, "--role", "measure"]
    command += ["--chunks", str(chunks), "--requests", str(requests)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    one, many = json.loads(out.splitlines()[-1])
    return one, many


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=65)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="another source tree: its relay measured too")
    parser.add_argument("--role", choices=["bench", "measure"], default="bench")
    args = parser.parse_args()
    if args.chunks < 2:
        parser.error("--chunks must be at least 2 (one-chunk answers are the reference)")
    if args.role == "measure":
        print(json.dumps(measure(args.chunks, args.requests)))
        return 0
    trees = {"this tree": None} | ({"baseline": args.baseline} if args.baseline else {})
    per_chunk: dict[str, list[float]] = {name: [] for name in trees}
    print(f"{args.requests} answers of 1 and of {args.chunks} chunks, one at a time, per round")
    for round_number in range(1, args.rounds + 1):
        for name, source in trees.items():
            one, many = measured_in(source, args.chunks, args.requests)
            chunk = (many - one) / (args.chunks - 1)
            per_chunk[name].append(chunk)
            print(
                f"round {round_number}, {name:9s}: {one:7.0f} µs per 1-chunk answer, "
                f"{many:7.0f} µs per {args.chunks}-chunk answer, {chunk:6.1f} µs per chunk"
            )
    for name, values in per_chunk.items():
        print(f"{name:9s}: median {statistics.median(values):.1f} µs per chunk")
    if args.baseline:
        pairs = zip(per_chunk["this tree"], per_chunk["baseline"], strict=True)
        ratios = ", ".join(f"{new / old:.2f}" for new, old in pairs)
        print(f"this tree / baseline, per chunk, by round: {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
