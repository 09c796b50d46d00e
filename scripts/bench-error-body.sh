#!/usr/bin/env bash
# Peak memory of a push against a registry that answers the upload with a
# 400 whose body is 600 MB (a hostile or broken registry), measured with
# /usr/bin/time -v. Usage: scripts/bench-error-body.sh [BINARY...]
# (default: target/debug/settings-image). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(target/debug/settings-image)
work=$(mktemp -d)
trap 'kill "$stub" 2>/dev/null || true; rm -rf "$work"' EXIT
cat > "$work/stub.py" <<'PY'
import http.server, sys
BODY = 600 * 1024 * 1024
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self, code, body=b"{}"):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_GET(self): self.reply(200)
    def do_HEAD(self): self.reply(404, b"")
    def do_POST(self):
        self.send_response(400)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(BODY))
        self.end_headers()
        chunk = b"x" * 65536
        try:
            for _ in range(BODY // len(chunk)):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$work/stub.py" > "$work/port" &
stub=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
mkdir -p "$work/shop" && echo "a: 1" > "$work/shop/app.yaml"
for bin in "${bins[@]}"; do
  /usr/bin/time -v "$bin" push --path "$work/shop" --repository "127.0.0.1:$port/shop" --tag v1 \
    > /dev/null 2> "$work/err" || true
  peak=$(grep "Maximum resident set size" "$work/err" | awk '{print $NF}')
  echo "$bin: peak RSS ${peak} KiB; $(grep -m1 '^error:' "$work/err" | cut -c1-200)"
done
