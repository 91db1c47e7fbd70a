#!/usr/bin/env python3
"""pgqueuer's no-op throughput, the peer of `halcyon bench`'s H (store hits).

Usage: bench-pgqueuer.py CONNINFO JOBS BATCH

CONNINFO is a libpq keyword string (host=… port=… dbname=… user=…). Installs pgqueuer's schema
in that database (dropping a previous one), enqueues JOBS no-op jobs, and drains them with one
QueueManager dequeuing BATCH jobs at a time (mode=drain). Prints one JSON line: jobs, seconds
(the drain only), cpu_seconds (this process). Then removes the schema.
"""
import asyncio
import json
import sys
import time
from datetime import timedelta

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries


def parse_conninfo(conninfo):
    """libpq's key=value syntax: values may be single-quoted, with \\ and \\' escapes."""
    keys, i, n = {}, 0, len(conninfo)
    while i < n:
        while i < n and conninfo[i].isspace():
            i += 1
        start = i
        while i < n and conninfo[i] not in "= ":
            i += 1
        key = conninfo[start:i].strip()
        while i < n and conninfo[i] in " =":
            i += 1
        value = ""
        if i < n and conninfo[i] == "'":
            i += 1
            while i < n and conninfo[i] != "'":
                if conninfo[i] == "\\" and i + 1 < n:
                    i += 1
                value += conninfo[i]
                i += 1
            i += 1
        else:
            while i < n and not conninfo[i].isspace():
                if conninfo[i] == "\\" and i + 1 < n:
                    i += 1
                value += conninfo[i]
                i += 1
        if key:
            keys[key] = value
    return keys


def connect_arguments(conninfo):
    keys = parse_conninfo(conninfo)
    return {"host": keys.get("host"), "port": int(keys.get("port", 5432)), "user": keys.get("user"), "database": keys.get("dbname")}


async def main(conninfo, jobs, batch):
    connection = await asyncpg.connect(**connect_arguments(conninfo))
    driver = AsyncpgDriver(connection)
    queries = Queries(driver)
    try:
        await queries.uninstall()
    except Exception:
        pass
    await queries.install()
    for start in range(0, jobs, 1000):
        n = min(1000, jobs - start)
        await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
    manager = QueueManager(queries)
    done = 0

    @manager.entrypoint("noop")
    async def noop(job):
        nonlocal done
        done += 1

    wall, cpu = time.perf_counter(), time.process_time()
    await manager.run(batch_size=batch, mode=QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=1))
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    await queries.uninstall()
    await connection.close()
    if done != jobs:
        sys.exit(f"pgqueuer ran {done} of {jobs} jobs")
    print(json.dumps({"jobs": done, "seconds": seconds, "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
