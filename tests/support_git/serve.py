#!/usr/bin/env python3
"""A smart-HTTP git server for the tests: `git http-backend` (the real one,
run as a CGI program per request) behind a small threaded HTTP server.

    serve.py --root DIR [--bind 127.0.0.1] [--user U --password P]
             [--bearer TOKEN] [--redirect-to BASE] [--cert C --key K]
             --log FILE

Serves every repository under DIR (`GIT_HTTP_EXPORT_ALL`). Prints the port
it listens on (one line) once it accepts connections.

- `--user/--password`: every request needs `Authorization: Basic` with them;
  `--bearer`: every request needs `Authorization: Bearer TOKEN`. Anything
  else gets 401 with a `WWW-Authenticate` challenge, as git servers answer.
- `--redirect-to BASE`: every request is answered `302 Found` with
  `Location: BASE + path?query` (a moved repository on another host).
- `--cert/--key`: HTTPS instead of HTTP.
- `--log FILE`: one JSON line per request: method, path, query, host,
  the Authorization header as received (null when absent), the status and
  the response body's length in bytes. What the tests count.
"""

import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOG_LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    def record(self, status, length):
        path, _, query = self.path.partition("?")
        entry = {
            "method": self.command,
            "path": path,
            "query": query,
            "host": self.headers.get("Host"),
            "authorization": self.headers.get("Authorization"),
            "status": status,
            "bytes": length,
        }
        with LOG_LOCK, open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def reply(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.record(status, len(body))

    def authorized(self):
        got = self.headers.get("Authorization")
        if ARGS.user is not None:
            want = "Basic " + base64.b64encode(
                f"{ARGS.user}:{ARGS.password}".encode()
            ).decode()
            return got == want, 'Basic realm="git"'
        if ARGS.bearer is not None:
            return got == f"Bearer {ARGS.bearer}", 'Bearer realm="git"'
        return True, None

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if ARGS.redirect_to:
            self.reply(302, [("Location", ARGS.redirect_to + self.path)], b"moved\n")
            return
        ok, challenge = self.authorized()
        if not ok:
            self.reply(401, [("WWW-Authenticate", challenge)], b"authentication required\n")
            return
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ARGS.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "HOME": ARGS.root,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        for header, var in (
            ("Git-Protocol", "GIT_PROTOCOL"),
            ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
        ):
            if self.headers.get(header):
                env[var] = self.headers[header]
        proc = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True
        )
        head, _, out = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = proc.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name.strip(), value.strip()))
        if proc.returncode != 0 and status == 200:
            status = 500
            out = proc.stderr
        self.reply(status, headers, out)

    do_GET = handle_any
    do_POST = handle_any
    do_HEAD = handle_any


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--bearer")
    p.add_argument("--redirect-to")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--log", required=True)
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.bind, ARGS.port), Handler)
    server.daemon_threads = True
    if ARGS.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
