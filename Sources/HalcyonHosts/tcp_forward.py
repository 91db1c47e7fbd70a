#!/usr/bin/env python3
"""TCP forwarders for the cross-host test and the bench's X: services of the root network
namespace (PostgreSQL's Unix socket, the S3 server and the origin on 127.0.0.1) made reachable on
other addresses, such as the root side of a veth pair a network namespace ("a host") is joined by.
Built into HalcyonHosts (embedded in the binary), which writes it out and runs it with python3.

usage: tcp_forward.py PORT_FILE --listen ADDR [--listen ADDR…] --target NAME=TARGET [--target …]
TARGET is unix:/path/to/socket or HOST:PORT. Every ADDR gets a listener per target, on a port of
the kernel's choosing; PORT_FILE is then written (atomically) as JSON:
{"ADDR": {"NAME": PORT, …}, …}. Each connection is carried both ways until either side ends it,
then both are closed; at most MAX_CONNECTIONS at once (more are closed at once). Runs until
SIGTERM or SIGKILL. Standard library only.
"""
import asyncio, json, os, signal, sys

MAX_CONNECTIONS = 512
CHUNK = 65536
active = 0


async def pump(reader, writer):
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass


async def carry(client_reader, client_writer, target):
    global active
    if active >= MAX_CONNECTIONS:
        client_writer.close()
        return
    active += 1
    try:
        if target.startswith("unix:"):
            up_reader, up_writer = await asyncio.open_unix_connection(target[5:])
        else:
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
    except OSError:
        active -= 1
        client_writer.close()
        return
    try:
        # Either direction ending closes both sides, so neither end waits on a half-open peer.
        await asyncio.gather(pump(client_reader, up_writer), pump(up_reader, client_writer))
    finally:
        active -= 1
        for w in (client_writer, up_writer):
            try:
                w.close()
            except OSError:
                pass


async def main():
    args = sys.argv[1:]
    port_file, listens, targets = args[0], [], {}
    i = 1
    while i < len(args):
        if args[i] == "--listen":
            listens.append(args[i + 1])
        elif args[i] == "--target":
            name, target = args[i + 1].split("=", 1)
            targets[name] = target
        else:
            sys.exit(f"tcp_forward.py: unknown argument {args[i]}")
        i += 2
    ports, servers = {}, []
    for address in listens:
        ports[address] = {}
        for name, target in targets.items():
            server = await asyncio.start_server(
                lambda r, w, t=target: carry(r, w, t), host=address, port=0, reuse_address=True, backlog=128)
            servers.append(server)
            ports[address][name] = server.sockets[0].getsockname()[1]
    with open(port_file + ".tmp", "w") as f:
        json.dump(ports, f)
    os.rename(port_file + ".tmp", port_file)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(main())
