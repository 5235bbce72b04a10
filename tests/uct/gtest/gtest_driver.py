#!/usr/bin/env python3
"""Runs UCX's UCT gtest (tests/uct/gtest/build.sh) on a list of transports and suites and gates the result
against known-failures.txt. Called by run.sh, which says what the arguments are; see README.md here.

One gtest process per (transport, gtest class), its filter "<tl>/<class>.*". The driver reads the process's
output as it comes: a test that runs longer than --test-timeout seconds is "hung": its stacks are taken (gdb,
where installed), the process is killed, and the tests of that class which had not run yet are run in a new
process (the hung one excluded). Every process also runs under coreutils `timeout` as a backstop. These bounds
detect hangs only; no result depends on how long a test took.
"""
import argparse
import fnmatch
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

RUN = re.compile(r"^\[ RUN      \] (\S+)")
# "[  FAILED  ] tl/class.test/0, where GetParam() = ... (5 ms)"; UCX's skip is "[     SKIP ] (reason)" before OK
END = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] ([^\s,]+)")
SKIP = re.compile(r"^\[ +SKIP +\]")


def list_tests(gtest, env, flt):
    out = subprocess.run(["timeout", "120", gtest, "--gtest_list_tests", "--gtest_filter=" + flt],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    tests, suite = [], None
    for line in out.splitlines():
        if not line.strip() or line.startswith(("[", "Note:")) or " INFO " in line or " WARN " in line:
            continue
        if not line.startswith(" "):
            suite = line.split()[0]
        elif suite:
            tests.append(suite + line.split()[0])
    return tests


def stacks(pid, log):
    gdb = shutil.which("gdb")
    if not gdb:
        log.write("# hung; no gdb here for its stacks\n")
        return
    r = subprocess.run(["timeout", "60", gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                        "-ex", "thread apply all bt 25"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    lines = [l for l in r.stdout.splitlines() if l.startswith(("Thread", "#"))]
    log.write("--- stacks (gdb) ---\n" + "\n".join(lines[:120]) + "\n")


def run_group(gtest, env, tests, test_timeout, log):
    """Runs the given tests (all of one class) in as few processes as hangs allow; returns {test: result}."""
    results = {}
    pending = list(tests)
    while pending:
        flt = ":".join(pending)
        backstop = str(int(test_timeout * len(pending) + 60))
        cmd = ["timeout", "-s", "KILL", backstop, gtest, "--gtest_filter=" + flt, "--gtest_color=no"]
        log.write("$ " + " ".join(cmd[:4]) + " gtest --gtest_filter=<%d tests>\n" % len(pending))
        log.flush()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             bufsize=1, start_new_session=True)
        current, started, skipped = None, time.monotonic(), False
        hung = None
        while True:
            r, _, _ = select.select([p.stdout], [], [], 1.0)
            if r:
                line = p.stdout.readline()
                if line == "":
                    break
                log.write(line)
                m = RUN.match(line)
                if m:
                    current, started, skipped = m.group(1), time.monotonic(), False
                    continue
                if SKIP.match(line) and current:
                    skipped = True
                    continue
                m = END.match(line)
                if m and m.group(2) in pending and m.group(2) not in results:
                    r = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)]
                    if r == "passed" and skipped:
                        r = "skipped"
                    results[m.group(2)] = r
                    current, skipped = None, False
            elif current and time.monotonic() - started > test_timeout:
                hung = current
                log.write("### HUNG: %s ran past %d s; killed\n" % (hung, test_timeout))
                # the gtest itself (the child of timeout)
                kids = subprocess.run(["pgrep", "-P", str(p.pid)], stdout=subprocess.PIPE, text=True).stdout.split()
                for k in kids:
                    stacks(int(k), log)
                os.killpg(p.pid, signal.SIGKILL)
                break
            if p.poll() is not None and not r:
                break
        for line in p.stdout:
            log.write(line)
        rc = p.wait()
        if hung:
            results[hung] = "hung"
        elif current and current not in results:
            # the process died (or the backstop killed it) inside a test
            results[current] = "hung" if rc in (124, 137, -9) else "failed"
            log.write("### %s: process ended (rc %d) inside it\n" % (current, rc))
        rest = [t for t in pending if t not in results]
        if rest and rest == pending:
            # nothing ran at all (crash at start): count them failed rather than loop
            for t in rest:
                results[t] = "failed"
            log.write("### process ended (rc %d) before any test ran\n" % rc)
            rest = []
        pending = rest
    return results


def load_known(path):
    known = []
    if not os.path.exists(path):
        return known
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        known.append({"pattern": parts[0], "class": parts[1] if len(parts) > 1 else "UNCLASSIFIED",
                      "line": n, "matched": [], "bad": []})
    return known


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gtest", required=True)
    ap.add_argument("--gdx-tls", default="")
    ap.add_argument("--ucx-tls", default="")
    ap.add_argument("--classes", required=True)
    ap.add_argument("--known", required=True)
    ap.add_argument("--logdir", required=True)
    ap.add_argument("--test-timeout", type=int, default=60)
    args = ap.parse_args()

    env = dict(os.environ)
    os.makedirs(args.logdir, exist_ok=True)
    gdx_tls = [t for t in args.gdx_tls.split(",") if t]
    ucx_tls = [t for t in args.ucx_tls.split(",") if t]
    classes = [c for c in args.classes.split(",") if c]
    results = {}   # test -> result
    owner = {}     # test -> tl
    t0 = time.monotonic()
    for tl in gdx_tls + ucx_tls:
        tl_tests = list_tests(args.gtest, env, ":".join("%s/%s.*" % (tl, c) for c in classes))
        if not tl_tests:
            print("gtest %s: no tests (transport not present here)" % tl, flush=True)
            continue
        with open(os.path.join(args.logdir, tl + ".log"), "w") as log:
            for c in classes:
                group = [t for t in tl_tests if t.startswith("%s/%s." % (tl, c))]
                if not group:
                    continue
                res = run_group(args.gtest, env, group, args.test_timeout, log)
                for t in group:
                    results[t] = res.get(t, "failed")
                    owner[t] = tl
        counts = {k: sum(1 for t in results if owner[t] == tl and results[t] == k)
                  for k in ("passed", "failed", "skipped", "hung")}
        print("gtest %s: %d passed, %d failed, %d skipped, %d hung (%.0f s so far)" % (
            tl, counts["passed"], counts["failed"], counts["skipped"], counts["hung"], time.monotonic() - t0),
            flush=True)

    with open(os.path.join(args.logdir, "results.tsv"), "w") as f:
        for t in sorted(results):
            f.write("%s\t%s\t%s\n" % (owner[t], t, results[t]))

    known = load_known(args.known)
    bad_new, bad_ucx = [], []
    for t in sorted(results):
        r = results[t]
        entry = next((k for k in known if fnmatch.fnmatchcase(t, k["pattern"])), None)
        if entry:
            entry["matched"].append(t)
            if r in ("failed", "hung"):
                entry["bad"].append((t, r))
        if r not in ("failed", "hung"):
            continue
        if owner[t] in ucx_tls:
            bad_ucx.append((t, r))
        elif entry is None:
            bad_new.append((t, r))

    print()
    print("summary:")
    for tl in gdx_tls + ucx_tls:
        c = {k: sum(1 for t in results if owner[t] == tl and results[t] == k)
             for k in ("passed", "failed", "skipped", "hung")}
        if any(c.values()):
            print("gtest %s: %d passed, %d failed, %d skipped (%d hung)" % (
                tl, c["passed"], c["failed"] + c["hung"], c["skipped"], c["hung"]))
    by_class = {}
    for k in known:
        for t, r in k["bad"]:
            by_class.setdefault(k["class"], []).append("%s (%s)" % (t, r))
    if by_class:
        print("known gdx failures, by class:")
        for cls in sorted(by_class):
            print("  %s: %d" % (cls, len(by_class[cls])))
            for x in by_class[cls]:
                print("    " + x)
    rc = 0
    for k in known:
        if k["matched"] and not k["bad"]:
            print("now passes: remove it from known-failures.txt: line %d: %s (%s)" % (
                k["line"], k["pattern"], k["class"]))
    if bad_new:
        rc = 1
        print("NEW gdx failures (not in known-failures.txt):")
        for t, r in bad_new:
            print("  %s: %s" % (t, r))
    if bad_ucx:
        rc = 1
        print("UCX's own transports failed (an environment problem, or the patch broke a test):")
        for t, r in bad_ucx:
            print("  %s: %s" % (t, r))
    print("per-test results: %s" % os.path.join(args.logdir, "results.tsv"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
