#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver for the suite: decodes each export with the OpenTelemetry
project's own protobuf definitions (PyPI `opentelemetry-proto`), never with Halcyon's code.

  POST <prefix>/v1/traces            decoded; its spans kept under <prefix>; 200 with an empty
                                     ExportTraceServiceResponse
  POST /hang<prefix>/v1/traces       read, then never answered (the connection held open)
  POST /refuse<prefix>/v1/traces     503
  GET  <prefix>/spans                the spans kept under <prefix>, as a JSON array: ids in hex,
                                     times as decimal strings (nanoseconds), attributes as
                                     {key: value}, each with its resource's
                                     attributes, its scope, and the request's headers
  GET  <prefix>/undecodable          how many requests under <prefix> did not decode

Usage: test-otlp-receiver.py --port-file FILE
"""
import argparse, json, os, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

lock = threading.Lock()
spans = {}        # prefix -> [span dict]
undecodable = {}  # prefix -> count


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def decode(body, headers):
    request = trace_service_pb2.ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append({
                    "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(), "parent_span_id": s.parent_span_id.hex(),
                    "trace_state": s.trace_state, "name": s.name, "kind": s.kind,
                    "start": str(s.start_time_unix_nano), "end": str(s.end_time_unix_nano), "flags": s.flags,
                    "attributes": attributes(s.attributes),
                    "events": [{"name": e.name, "time": str(e.time_unix_nano), "attributes": attributes(e.attributes)} for e in s.events],
                    "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex(), "trace_state": l.trace_state,
                               "flags": l.flags} for l in s.links],
                    "status": {"code": s.status.code, "message": s.status.message},
                    "resource": resource, "scope": {"name": ss.scope.name, "version": ss.scope.version},
                    "headers": headers,
                })
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", content_type="application/x-protobuf"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        path = self.path.split("?")[0]
        if path.startswith("/hang/"):
            time.sleep(3600)
            return
        if path.startswith("/refuse/"):
            self.reply(503, b"refused")
            return
        if not path.endswith("/v1/traces"):
            self.reply(404)
            return
        prefix = path[: -len("/v1/traces")]
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            decoded = decode(body, headers)
        except Exception:
            with lock:
                undecodable[prefix] = undecodable.get(prefix, 0) + 1
            self.reply(400, b"undecodable")
            return
        with lock:
            spans.setdefault(prefix, []).extend(decoded)
        self.reply(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

    def do_GET(self):
        path = self.path.split("?")[0]
        with lock:
            if path.endswith("/spans"):
                body = json.dumps(spans.get(path[: -len("/spans")], [])).encode()
            elif path.endswith("/undecodable"):
                body = json.dumps(undecodable.get(path[: -len("/undecodable")], 0)).encode()
            else:
                self.reply(404)
                return
        self.reply(200, body, "application/json")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
