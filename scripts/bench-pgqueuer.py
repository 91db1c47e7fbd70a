#!/usr/bin/env python3
"""pgqueuer's no-op throughput, the peer of `halcyon bench`'s H (store hits).

Usage: bench-pgqueuer.py HOST PORT USER DATABASE JOBS BATCH

HOST may be a socket directory. Installs pgqueuer's schema in DATABASE (dropping a previous one), enqueues JOBS no-op jobs, and drains them with one
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


async def main(host, port, user, database, jobs, batch):
    connection = await asyncpg.connect(host=host, port=port, user=user, database=database)
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
    host, port, user, database, jobs, batch = sys.argv[1:7]
    asyncio.run(main(host, int(port), user, database, int(jobs), int(batch)))
