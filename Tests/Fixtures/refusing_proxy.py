#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 to an S3 server's Unix socket that can start refusing credentials,
standing in for a key that was revoked or rotated while workers run.

usage: refusing_proxy.py UNIX_SOCKET PORT_FILE
SIGUSR1: every request is answered 403 SignatureDoesNotMatch (connections open at that moment are
closed, so clients reconnect and are refused). SIGUSR2: requests are carried to the server again.
It counts what it refused in PORT_FILE.refused. Standard library only.
"""
import os, signal, socket, sys, threading

refusing = threading.Event()
lock = threading.Lock()
open_connections = set()
refused = 0
port_file = ""

ERROR = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>'
         b'<Message>The request signature we calculated does not match the signature you provided.</Message>'
         b'<RequestId>refusing-proxy</RequestId></Error>')


def close(*socks):
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            s.close()
        except OSError:
            pass


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        close(src, dst)
        with lock:
            open_connections.discard(src)
            open_connections.discard(dst)


def refuse(client):
    """Reads one request's head and body, answers 403 and closes."""
    global refused
    try:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = client.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip() or b"0")
        while len(rest) < length:
            chunk = client.recv(65536)
            if not chunk:
                break
            rest += chunk
        client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nConnection: close\r\n"
                       b"Content-Length: " + str(len(ERROR)).encode() + b"\r\n\r\n" + ERROR)
        with lock:
            refused += 1
            with open(port_file + ".refused.tmp", "w") as f:
                f.write(str(refused))
            os.rename(port_file + ".refused.tmp", port_file + ".refused")
    except OSError:
        pass
    finally:
        close(client)


def serve(client, target):
    if refusing.is_set():
        refuse(client)
        return
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        close(client)
        return
    with lock:
        open_connections.update((client, upstream))
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def start_refusing(*_):
    refusing.set()
    with lock:
        connections = list(open_connections)
    close(*connections)


def main():
    global port_file
    target, port_file = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGUSR1, start_refusing)
    signal.signal(signal.SIGUSR2, lambda *_: refusing.clear())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        try:
            client, _ = listener.accept()
        except InterruptedError:
            continue
        threading.Thread(target=serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    main()
