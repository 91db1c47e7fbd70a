#!/usr/bin/env python3
"""Halcyon's test origin: a real HTTP server on 127.0.0.1 (and on ::1, same port, when the host has
IPv6 loopback) with fault injection.

Serves files from --root and counts every request by path+query. Endpoints:
  /files/NAME[?…]                     the file NAME from the root (ETag added; If-None-Match → 304,
                                      counted as "304 PATH")
  /fail/N/STATUS/KEY/NAME             fail the first N requests for KEY with STATUS, then serve NAME
  /store/ANY/…/NAME                   the file NAME, whatever the path before it (a CDN over a store)
  /retry-after/SECONDS/KEY/NAME       first request for KEY: 429 with Retry-After, then NAME
  /status/CODE                        answer CODE with a short body
  /slow/SECONDS                       sleep, then 200 with a tiny body
  /slowfile/SECONDS/NAME              sleep, then serve NAME
  /trickle/BYTES_PER_SECOND/TOTAL     dribble bytes slowly
  /drip/FAST_BYTES/BYTES_PER_SECOND/NAME
                                      the file NAME: its first FAST_BYTES at once, the rest dripped
                                      (a tenth of the rate every 100 ms); "burst PATH" is counted
                                      once the fast part is sent
  /truncated/NAME                     promise the whole file, send half, close
  /huge/BYTES                         stream BYTES bytes without Content-Length
  /notimage                           HTML under Content-Type image/jpeg
  /redirect?to=URL                    302 to URL
  /redirect-loop/N                    302 to /redirect-loop/N+1, forever
  /bigheaders/BYTES                   a 200 whose headers total about BYTES bytes
  /as/TYPE/SUBTYPE/NAME               the file NAME under Content-Type TYPE/SUBTYPE
  /_headers                           the request headers as JSON
  ?group=G on any GET                 counts G's requests in flight; /_concurrency/G is the most at once
  POST /webhook/KEY/FAILS?secret=S    a webhook receiver: checks X-Halcyon-Signature (HMAC-SHA256 of
                                      the body keyed by S; 401 when wrong), answers 500 to the first
                                      FAILS deliveries for KEY, then 200; /_webhooks/KEY lists them
                                      (each with its arrival time "at"); &status=N answers N instead
                                      of 500, &retry_after=V adds Retry-After: V to those answers
  /_counts                            JSON {path: count}; /_reset clears counts and failure state
The chosen port is written to --port-file once listening.
"""
import argparse, errno, hashlib, hmac, json, os, socket, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlsplit, parse_qs

lock = threading.Lock()
counts = {}
failures = {}
inflight = {}      # group -> requests in flight now
most_inflight = {}  # group -> most in flight at once
webhooks = {}      # key -> [{"status", "signature_ok", "body", "attempt_header"}]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY a kept-alive connection
    # waits ~40 ms per response on the client's delayed ACK.
    disable_nagle_algorithm = True
    server_version = "HalcyonTestOrigin/1"

    def log_message(self, *args):
        pass

    def send_body(self, status, body, content_type="application/octet-stream", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def read_file(self, name):
        """The bytes of the file NAME in the root, or None."""
        try:
            with open(os.path.join(self.server.root, os.path.basename(name)), "rb") as f:
                return f.read()
        except OSError:
            return None

    def serve_file(self, name):
        data = self.read_file(name)
        if data is None:
            return self.send_body(404, b"not found", "text/plain")
        etag = '"%s"' % hashlib.sha256(data).hexdigest()[:16]
        if self.headers.get("If-None-Match") == etag:
            with lock:
                counts["304 " + self.path] = counts.get("304 " + self.path, 0) + 1
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        ctype = {"jpg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}.get(name.rsplit(".", 1)[-1], "application/octet-stream")
        self.send_body(200, data, ctype, {"ETag": etag})

    def do_POST(self):
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if len(parts) != 3 or parts[0] != "webhook":
            return self.send_body(404, b"no such endpoint", "text/plain")
        key, fails = parts[1], int(parts[2])
        query = parse_qs(url.query)
        secret = query.get("secret", [""])[0].encode()
        fail_status = int(query.get("status", ["500"])[0])
        retry_after = query.get("retry_after", [None])[0]
        expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
        signature_ok = hmac.compare_digest(self.headers.get("X-Halcyon-Signature", ""), expected)
        with lock:
            seen = webhooks.setdefault(key, [])
            status = 401 if not signature_ok else (fail_status if len(seen) < fails else 200)
            seen.append({"status": status, "signature_ok": signature_ok, "body": body.decode("utf-8", "replace"), "at": time.time(),
                         "attempt_header": self.headers.get("X-Halcyon-Delivery-Attempt"),
                         "webhook_id": self.headers.get("webhook-id"), "webhook_timestamp": self.headers.get("webhook-timestamp"),
                         "webhook_signature": self.headers.get("webhook-signature"),
                         "traceparent": self.headers.get("traceparent"), "tracestate": self.headers.get("tracestate")})
        extra = {"Retry-After": retry_after} if retry_after is not None and status not in (200, 401) else None
        return self.send_body(status, b"webhook %d" % status, "text/plain", extra)

    def do_GET(self):
        group = parse_qs(urlsplit(self.path).query).get("group", [None])[0]
        if group is None:
            return self.handle_get()
        with lock:
            inflight[group] = inflight.get(group, 0) + 1
            most_inflight[group] = max(most_inflight.get(group, 0), inflight[group])
        try:
            return self.handle_get()
        finally:
            with lock:
                inflight[group] -= 1

    def handle_get(self):
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        with lock:
            counts[self.path] = counts.get(self.path, 0) + 1
        if not parts:
            return self.send_body(200, b"halcyon test origin", "text/plain")
        head = parts[0]
        if head == "_counts":
            with lock:
                body = json.dumps(counts).encode()
            return self.send_body(200, body, "application/json")
        if head == "_headers":
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
            return self.send_body(200, body, "application/json")
        if head == "_concurrency" and len(parts) == 2:
            with lock:
                return self.send_body(200, str(most_inflight.get(parts[1], 0)).encode(), "text/plain")
        if head == "_webhooks" and len(parts) == 2:
            with lock:
                body = json.dumps(webhooks.get(parts[1], [])).encode()
            return self.send_body(200, body, "application/json")
        if head == "_reset":
            with lock:
                counts.clear()
                failures.clear()
            return self.send_body(200, b"ok", "text/plain")
        if head == "files" and len(parts) == 2:
            return self.serve_file(parts[1])
        if head == "store" and len(parts) >= 3:
            return self.serve_file(parts[-1])
        if head == "fail" and len(parts) == 5:
            n, status, key, name = int(parts[1]), int(parts[2]), parts[3], parts[4]
            with lock:
                seen = failures.get(key, 0)
                failures[key] = seen + 1
            if seen < n:
                return self.send_body(status, b"injected failure", "text/plain")
            return self.serve_file(name)
        if head == "retry-after" and len(parts) == 4:
            seconds, key, name = parts[1], parts[2], parts[3]
            with lock:
                seen = failures.get(key, 0)
                failures[key] = seen + 1
            if seen == 0:
                return self.send_body(429, b"slow down", "text/plain", {"Retry-After": seconds})
            return self.serve_file(name)
        if head == "status" and len(parts) == 2:
            return self.send_body(int(parts[1]), b"status " + parts[1].encode(), "text/plain")
        if head == "slow" and len(parts) == 2:
            time.sleep(float(parts[1]))
            return self.send_body(200, b"late", "text/plain")
        if head == "slowonce" and len(parts) == 4:
            # The first request for KEY waits SECONDS, later ones are served at once: a job
            # that hangs on its first attempt and not on its second.
            seconds, key, name = float(parts[1]), parts[2], parts[3]
            with lock:
                seen = failures.get(key, 0)
                failures[key] = seen + 1
            if seen == 0:
                time.sleep(seconds)
            return self.serve_file(name)
        if head == "slowfile" and len(parts) == 3:
            time.sleep(float(parts[1]))
            return self.serve_file(parts[2])
        if head == "trickle" and len(parts) == 3:
            rate, total = max(1, int(parts[1])), int(parts[2])
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(total))
            self.end_headers()
            try:
                for _ in range(total):
                    self.wfile.write(b"\xff")
                    self.wfile.flush()
                    time.sleep(1.0 / rate)
            except OSError:
                pass
            return
        if head == "drip" and len(parts) == 4:
            fast, rate, data = int(parts[1]), max(10, int(parts[2])), self.read_file(parts[3])
            if data is None:
                return self.send_body(404, b"not found", "text/plain")
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data[:fast])
                self.wfile.flush()
                with lock:
                    counts["burst " + self.path] = counts.get("burst " + self.path, 0) + 1
                step = rate // 10
                for at in range(fast, len(data), step):
                    time.sleep(0.1)
                    self.wfile.write(data[at:at + step])
                    self.wfile.flush()
            except OSError:
                pass
            return
        if head == "truncated" and len(parts) == 2:
            path = os.path.join(self.server.root, os.path.basename(parts[1]))
            with open(path, "rb") as f:
                data = f.read()
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if head == "huge" and len(parts) == 2:
            total = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            chunk = b"\xff\xd8\xff" + b"\0" * 65533
            sent = 0
            try:
                while sent < total:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except OSError:
                pass
            return
        if head == "notimage":
            return self.send_body(200, b"<html><body>not an image</body></html>", "image/jpeg")
        if head == "redirect":
            to = parse_qs(url.query).get("to", ["/"])[0]
            return self.send_body(302, b"", "text/plain", {"Location": to})
        if head == "bigheaders" and len(parts) == 2:
            total = int(parts[1])
            self.send_response(200)
            for i in range(max(1, total // 1000)):
                self.send_header("X-Filler-%d" % i, "x" * 980)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if head == "as" and len(parts) == 4:
            path = os.path.join(self.server.root, os.path.basename(parts[3]))
            if not os.path.isfile(path):
                return self.send_body(404, b"no such file", "text/plain")
            with open(path, "rb") as f:
                return self.send_body(200, f.read(), parts[1] + "/" + parts[2])
        if head == "redirect-loop" and len(parts) == 2:
            return self.send_body(302, b"", "text/plain", {"Location": "/redirect-loop/%d" % (int(parts[1]) + 1)})
        return self.send_body(404, b"no such endpoint", "text/plain")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    address_family = socket.AF_INET

    def handle_error(self, request, client_address):
        # Clients hanging up mid-response is what the timeout and size-limit tests do on purpose;
        # anything else is a bug in this origin and keeps its traceback.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class Server6(Server):
    address_family = socket.AF_INET6

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()


def listen(port):
    """127.0.0.1:PORT, and [::1]:PORT beside it (the same port, so one origin URL serves both
    families); a few tries when a free port on one is taken on the other. Without IPv6 loopback,
    IPv4 alone."""
    for _ in range(20):
        server = Server(("127.0.0.1", port), Handler)
        try:
            return server, Server6(("::1", server.server_address[1]), Handler)
        except OSError as e:
            if e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                return server, None
            server.server_close()
            if port:
                raise
    raise SystemExit("test-origin: no port free on both 127.0.0.1 and ::1")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    server, server6 = listen(args.port)
    server.root = args.root
    if server6 is not None:
        server6.root = args.root
        threading.Thread(target=server6.serve_forever, daemon=True).start()
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
