#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 to a Unix socket that can be frozen, standing in for a network that
stops carrying packets without closing anything (a half-open connection).

usage: freeze_proxy.py UNIX_SOCKET PORT_FILE
SIGUSR1 freezes it: no byte moves either way on any connection, and new connections are
accepted but never answered. SIGUSR2 thaws it. Standard library only.
"""
import signal, socket, sys, threading, time

frozen = threading.Event()


def pump(src, dst):
    try:
        while True:
            while frozen.is_set():
                time.sleep(0.05)
            data = src.recv(65536)
            if not data:
                break
            while frozen.is_set():
                time.sleep(0.05)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client, target):
    while frozen.is_set():
        time.sleep(0.05)
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def main():
    target, port_file = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGUSR1, lambda *_: frozen.set())
    signal.signal(signal.SIGUSR2, lambda *_: frozen.clear())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    main()
