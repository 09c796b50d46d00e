#!/usr/bin/env python3
"""A hostile smart-HTTP git server (protocol v2) for the tests: it lists one
branch, then answers the fetch with a pack built to exhaust the client; or
its ref advertisement or negotiation never ends.

    hostile_pack.py --mode MODE --log FILE [--bind 127.0.0.1]

Prints the port it listens on (one line) once it accepts connections. Every
repository path is the same repository: `refs/heads/main` at a made-up
commit. The fetch's answer is a `packfile` section (side band 1) whose pack:

- `huge-object`: holds one blob whose header claims 2^40 bytes, its zlib
  data stored blocks of incompressible bytes that never end;
- `endless-object`: holds one blob whose header claims 100 bytes, its zlib
  data the same endless stored blocks (it inflates past its claim);
- `many-objects`: claims 2^32-1 objects in its header, then endless blobs
  of 100 bytes each;
- `endless-nothing`: holds one blob claiming 100 bytes whose zlib data is
  empty stored blocks without end (bytes that inflate to nothing).

Before the pack:

- `endless-v1-refs`: `info/refs` is a protocol v1 advertisement (what a
  server that speaks no v2 sends) listing new branches without end;
- `endless-ls-refs`: v2, and the `ls-refs` answer lists new branches
  without end;
- `many-refs`: v2, the `ls-refs` answer lists `refs/heads/main` and then
  200,000 short branches, and ends;
- `endless-acks`: v2, `ls-refs` lists `refs/heads/main`; the fetch's
  answer is an `acknowledgments` section of `ACK` lines without end.

The stream ends only when the client stops reading. `--log FILE`: one JSON
line per request: method, path, the git command of a POST, and the bytes of
the response body written before the client hung up (what the tests bound).
"""

import argparse
import json
import os
import struct
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOG_LOCK = threading.Lock()
COMMIT = "1" * 40


def pkt(data):
    if isinstance(data, str):
        data = data.encode()
    return b"%04x" % (len(data) + 4) + data


FLUSH = b"0000"


def object_header(kind, size):
    """A pack entry header: type (3 = blob) and size, as a varint."""
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def stored_blocks(payload):
    """Non-final deflate stored blocks of `payload` (at most 65535 bytes each)."""
    out = bytearray()
    for i in range(0, len(payload), 65535):
        part = payload[i : i + 65535]
        out += b"\x00" + struct.pack("<HH", len(part), len(part) ^ 0xFFFF) + part
    return bytes(out)


def pack_stream(mode):
    """The pack, as an endless generator of chunks."""
    noise = os.urandom(1 << 20)
    endless_data = stored_blocks(noise)
    zlib_head = b"\x78\x01"
    if mode == "huge-object":
        yield b"PACK" + struct.pack(">II", 2, 1) + object_header(3, 1 << 40) + zlib_head
        while True:
            yield endless_data
    elif mode == "endless-object":
        yield b"PACK" + struct.pack(">II", 2, 1) + object_header(3, 100) + zlib_head
        while True:
            yield endless_data
    elif mode == "many-objects":
        blob = object_header(3, 100) + zlib.compress(os.urandom(100))
        yield b"PACK" + struct.pack(">II", 2, 0xFFFFFFFF)
        chunk = blob * ((1 << 20) // len(blob))
        while True:
            yield chunk
    elif mode == "endless-nothing":
        yield b"PACK" + struct.pack(">II", 2, 1) + object_header(3, 100) + zlib_head
        empty = (b"\x00" + struct.pack("<HH", 0, 0xFFFF)) * (1 << 16)
        while True:
            yield empty
    else:
        raise SystemExit(f"unknown mode {mode}")


def sideband(chunks):
    """Each chunk as side-band 1 packet lines (at most 65515 bytes of data each)."""
    for chunk in chunks:
        out = bytearray()
        for i in range(0, len(chunk), 65515):
            out += pkt(b"\x01" + chunk[i : i + 65515])
        yield bytes(out)


def ref_lines(count):
    """`<oid> refs/heads/bN` lines, a megabyte a chunk; `count` of them, or
    without end."""
    n = 0
    while count is None or n < count:
        chunk = bytearray()
        while len(chunk) < (1 << 20) and (count is None or n < count):
            chunk += pkt(f"{COMMIT} refs/heads/b{n}\n")
            n += 1
        yield bytes(chunk)


def v1_refs():
    """A protocol v1 advertisement that never ends."""
    yield pkt("# service=git-upload-pack\n") + FLUSH
    yield pkt(f"{COMMIT} refs/heads/main\0multi_ack_detailed side-band-64k ofs-delta agent=hostile\n")
    yield from ref_lines(None)


def v2_refs(count):
    """An `ls-refs` answer: main, then `count` branches (or no end), then flush."""
    yield pkt(f"{COMMIT} refs/heads/main\n")
    yield from ref_lines(count)
    yield FLUSH


def acks():
    """An `acknowledgments` section that never ends."""
    yield pkt("acknowledgments\n")
    line = pkt(f"ACK {COMMIT}\n")
    chunk = line * ((1 << 20) // len(line))
    while True:
        yield chunk


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def record(self, command, written):
        entry = {
            "method": self.command,
            "path": self.path.partition("?")[0],
            "command": command,
            "bytes": written,
        }
        with LOG_LOCK, open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def send(self, content_type, body):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if ARGS.mode == "endless-v1-refs":
            self.endless(None, v1_refs())
            return
        body = (
            pkt("version 2\n")
            + pkt("agent=hostile\n")
            + pkt("ls-refs=unborn\n")
            + pkt("fetch=shallow\n")
            + pkt("object-format=sha1\n")
            + FLUSH
        )
        self.send("application/x-git-upload-pack-advertisement", body)
        self.record(None, len(body))

    def endless(self, command, chunks):
        """Streams `chunks` (without a length) until they or the client end."""
        self.send_response(200)
        kind = "advertisement" if command is None else "result"
        self.send_header("Content-Type", f"application/x-git-upload-pack-{kind}")
        self.end_headers()
        written = 0
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                written += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.record(command or "info/refs", written)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        request = self.rfile.read(length) if length else b""
        command = "fetch" if b"command=fetch" in request else "ls-refs"
        if command == "ls-refs" and ARGS.mode == "endless-ls-refs":
            self.endless(command, v2_refs(None))
            return
        if command == "ls-refs" and ARGS.mode == "many-refs":
            self.endless(command, v2_refs(200_000))
            return
        if command == "fetch" and ARGS.mode == "endless-acks":
            self.endless(command, acks())
            return
        if command == "ls-refs":
            body = pkt(f"{COMMIT} refs/heads/main\n") + FLUSH
            self.send("application/x-git-upload-pack-result", body)
            self.record(command, len(body))
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-git-upload-pack-result")
        self.end_headers()
        written = 0
        try:
            self.wfile.write(pkt("packfile\n"))
            for piece in sideband(pack_stream(ARGS.mode)):
                self.wfile.write(piece)
                written += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.record(command, written)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--log", required=True)
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.bind, 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
