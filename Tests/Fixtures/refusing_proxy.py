#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 to an S3 server's Unix socket that can start refusing credentials,
standing in for a key that was revoked or rotated while workers run.

usage: refusing_proxy.py UNIX_SOCKET PORT_FILE
SIGUSR1: every request is answered 403 SignatureDoesNotMatch (connections open at that moment are
closed, so clients reconnect and are refused). SIGHUP: only writes (PUT, POST, DELETE) are answered
403 AccessDenied — a bucket policy that lets the key read but not write — and reads are carried one
per connection. SIGUSR2: requests are carried to the server again. It counts what it refused in
PORT_FILE.refused. Standard library only.
"""
import os, signal, socket, sys, threading

refusing = threading.Event()
refusing_writes = threading.Event()
lock = threading.Lock()
open_connections = set()
refused = 0
port_file = ""

ERROR = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>'
         b'<Message>The request signature we calculated does not match the signature you provided.</Message>'
         b'<RequestId>refusing-proxy</RequestId></Error>')
WRITE_ERROR = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
               b'<Message>Access Denied.</Message><RequestId>refusing-proxy</RequestId></Error>')


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


def read_request(client):
    """Reads one request's head and body (None when the client went away)."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = client.recv(65536)
        if not chunk:
            return None
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
    return head, rest


def answer_403(client, error):
    global refused
    client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nConnection: close\r\n"
                   b"Content-Length: " + str(len(error)).encode() + b"\r\n\r\n" + error)
    with lock:
        refused += 1
        with open(port_file + ".refused.tmp", "w") as f:
            f.write(str(refused))
        os.rename(port_file + ".refused.tmp", port_file + ".refused")


def refuse(client):
    """Reads one request, answers 403 SignatureDoesNotMatch and closes."""
    try:
        if read_request(client) is not None:
            answer_403(client, ERROR)
    except OSError:
        pass
    finally:
        close(client)


def serve_reads_only(client, target):
    """One request on this connection: a write is refused, a read carried with `Connection: close`
    and its answer relayed until the server closes."""
    upstream = None
    try:
        request = read_request(client)
        if request is None:
            return
        head, body = request
        if head.split(b" ", 1)[0] in (b"PUT", b"POST", b"DELETE"):
            answer_403(client, WRITE_ERROR)
            return
        lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"connection:")]
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(target)
        upstream.sendall(b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body)
        while True:
            data = upstream.recv(65536)
            if not data:
                break
            client.sendall(data)
    except OSError:
        pass
    finally:
        close(client)
        if upstream is not None:
            close(upstream)


def serve(client, target):
    if refusing.is_set():
        refuse(client)
        return
    if refusing_writes.is_set():
        serve_reads_only(client, target)
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


def close_open_connections():
    with lock:
        connections = list(open_connections)
    close(*connections)


def start_refusing(*_):
    refusing.set()
    close_open_connections()


def start_refusing_writes(*_):
    refusing_writes.set()
    close_open_connections()


def carry_all(*_):
    refusing.clear()
    refusing_writes.clear()


def main():
    global port_file
    target, port_file = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGUSR1, start_refusing)
    signal.signal(signal.SIGHUP, start_refusing_writes)
    signal.signal(signal.SIGUSR2, carry_all)
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
