#!/usr/bin/env python3
"""The walk of one run through the modules: which source files of the crate
it passes, in the order it first calls into each function, and how often it
climbs back into a module it had already left.

Usage: python3 scripts/walk.py [--from FUNCTION] [--env K=V ...] -- BIN ARGS...

It runs BIN under gdb (Debian's `gdb`) with a breakpoint on every function of
the crate (the binary's symbol table: `settings_image::...`), each removed at
its first hit, so the run is slowed only once per function. From the first
call of FUNCTION (default `settings_image::cli::run`: after clap parsed the
command line) it prints:

  files   the crate's files passed, in the order first entered
  rooms   the top-level modules passed (`src/history/git.rs` is in
          `history`; `src/pipeline.rs` is `pipeline`)
  climbs  how many times the walk enters a file (room) it had left before
  faces   how many times it climbs back from the core into a face

A walk that goes down and comes back up to its caller counts a climb each
time it re-enters the caller's file after a callee's; a face that reads its
inputs, calls the core once and renders the outcome climbs once. The
numbers depend on the run (what it finds and does), so compare the same run
of two binaries. Needs a binary with line tables (the dev profile has them).
"""
import os
import subprocess
import sys
import tempfile

TRACE = r'''
import gdb, os, subprocess
out = open(os.environ["WALK_OUT"], "w")
binary = gdb.current_progspace().filename
gdb.execute("set pagination off"); gdb.execute("set confirm off")
# No shell between gdb and the run: a shell drops variables whose names it
# cannot spell, such as the runner's INPUT_TIMESTAMP-TAG.
gdb.execute("set startup-with-shell off")
gdb.execute("starti", to_string=True)
base = None
for l in gdb.execute("info proc mappings", to_string=True).splitlines():
    f = l.split()
    if f and f[-1] == binary and f[0].startswith("0x"):
        base = int(f[0], 16) - int(f[3], 16)
        break
class First(gdb.Breakpoint):
    def __init__(self, addr, name):
        super().__init__("*" + addr, internal=True); self.nm = name
    def stop(self):
        sal = gdb.find_pc_line(gdb.selected_frame().pc())
        out.write((sal.symtab.filename if sal.symtab else "?") + "\t" + self.nm + "\n"); out.flush()
        self.enabled = False
        return False
syms = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True).stdout
for line in syms.splitlines():
    p = line.split(" ", 2)
    if len(p) < 3 or p[1] not in "tT": continue
    if not (p[2].startswith("settings_image::") or p[2].startswith("<settings_image::")): continue
    if "drop_in_place" in p[2]: continue
    First(hex(base + int(p[0], 16)), p[2])
gdb.execute("continue")
'''


FACES = {"cli", "action", "controller"}


def room(path):
    rel = path[len("src/"):] if path.startswith("src/") else path
    first = rel.split("/")[0]
    return first[:-3] if first.endswith(".rs") else first


def climbs(seq):
    left, n, cur = set(), 0, None
    for s in seq:
        if s == cur:
            continue
        if s in left:
            n += 1
        if cur is not None:
            left.add(cur)
        cur = s
    return n


def main():
    args = sys.argv[1:]
    start, env = "settings_image::cli::run", dict(os.environ)
    while args and args[0] != "--":
        if args[0] == "--from":
            start, args = args[1], args[2:]
        elif args[0] == "--env":
            k, _, v = args[1].partition("=")
            env[k] = v
            args = args[2:]
        else:
            sys.exit(__doc__)
    cmd = args[1:]
    if not cmd:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        script, trace = os.path.join(tmp, "trace.py"), os.path.join(tmp, "trace.txt")
        with open(script, "w") as f:
            f.write(TRACE)
        env["WALK_OUT"] = trace
        run = subprocess.run(["gdb", "-batch", "-x", script, "--args", *cmd], env=env,
                             capture_output=True, text=True)
        with open(trace) as f:
            rows = [l.rstrip("\n").split("\t", 1) for l in f if "\t" in l]
    names = [n for _, n in rows]
    if start not in names:
        sys.exit(f"walk.py: {start} was never called\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    rows = rows[names.index(start):]
    files = [f for f, _ in rows if f.startswith("src/")]
    order = list(dict.fromkeys(files))
    rooms = [room(f) for f in files]
    print(f"files  {len(order)}, climbs {climbs(files)}")
    print(f"rooms  {len(dict.fromkeys(rooms))}, climbs {climbs(rooms)}")
    faces = [r if r in FACES else "core" for r in rooms]
    print(f"faces  {climbs(faces)} climbs back from the core into a face ({', '.join(sorted(FACES))})")
    print("order  " + " ".join(order))


if __name__ == "__main__":
    main()
