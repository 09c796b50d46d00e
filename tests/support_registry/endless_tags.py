#!/usr/bin/env python3
"""A hostile OCI registry for scripts/bench-hostile-servers.sh: its tag list
never ends.

    endless_tags.py --mode MODE [--tags-per-page N] [--bind 127.0.0.1]

Prints the port it listens on (one line) once it accepts connections.
`GET /v2/` answers 200 (anonymous). `GET /v2/NAME/tags/list` answers a page
of N new tags (600,000 by default: 15.6 MB, under the 16 MiB a client reads
of one page) with a `Link` to the next page:

- `endless`: the next page is always a new URL (`?n=1000&last=pK`), with
  new tags;
- `loop`: the next page is the same URL again, with new tags.

Every other request is answered 404 (MANIFEST_UNKNOWN): a client that got
past the tag list would see an empty repository.
"""

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
PAGES = 0
LOCK = threading.Lock()


def page(n, count):
    """Page `n`: `count` tags no other page has, as the JSON body."""
    prefix = "p%05d-" % n
    tags = ",".join('"%s%07d"' % (prefix, i) for i in range(count))
    return ('{"name":"app","tags":[%s]}' % tags).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        global PAGES
        path = self.path.partition("?")[0]
        if path == "/v2/":
            self.reply(200, b"{}")
            return
        if path.endswith("/tags/list"):
            with LOCK:
                n = PAGES
                PAGES += 1
            if ARGS.mode == "loop":
                nxt = self.path
            else:
                nxt = "%s?n=1000&last=p%d" % (path, n)
            self.reply(200, page(n, ARGS.tags_per_page), [("Link", '<%s>; rel="next"' % nxt)])
            return
        self.reply(404, json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "unknown"}]}).encode())

    do_HEAD = do_GET


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["endless", "loop"], required=True)
    p.add_argument("--tags-per-page", type=int, default=600_000)
    p.add_argument("--bind", default="127.0.0.1")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.bind, 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
