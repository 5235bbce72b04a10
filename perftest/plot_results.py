#!/usr/bin/python3
"""Plot gdx_perftest JSON results: bandwidth vs size and latency vs size, several runs on one chart.

Usage: perftest/plot_results.py [-o OUTDIR] [--prefix NAME] [--labels A,B,...] RESULT.json [RESULT.json ...]

Writes OUTDIR/NAME-bandwidth.png (bandwidth tests: put_bw, get_bw) and OUTDIR/NAME-latency.png (put_lat), each
with one line per (run, test, memory pair, transport); am_bw and am_lat rows of results taken before those tests
were removed (perftest/README.md) are still plotted. The path that carried the bytes is
in the legend (direct / staged / mixed); rows that drew a sanity warning are marked with an x.
Needs Debian's python3-matplotlib (Agg backend, no display). Exit status: 0 ok, 1 bad input, 2 bad arguments.
"""
import argparse
import json
import math
import os
import sys

BW_TESTS = ("put_bw", "get_bw", "am_bw")
LAT_TESTS = ("put_lat", "am_lat")


def size_label(n):
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ValueError("cannot read %s: %s" % (path, e.strerror))
    except json.JSONDecodeError as e:
        raise ValueError("%s is not valid JSON: %s" % (path, e))
    if not isinstance(doc, dict) or doc.get("tool") != "gdx_perftest" or not isinstance(doc.get("rows"), list):
        raise ValueError("%s is not a gdx_perftest result (no 'tool': 'gdx_perftest' with 'rows')" % path)
    return doc


def series(doc, label, tests, value):
    """(legend, [(size, y, warned)]) per test/memory pair/transport, in file order."""
    out = {}
    for r in doc["rows"]:
        if r.get("test") not in tests:
            continue
        y = value(r)
        if y is None or not isinstance(y, (int, float)) or not math.isfinite(y) or y <= 0:
            continue
        kind = r.get("path_kind") or "?"
        key = "%s%s %s->%s %s [%s]" % (label + ": " if label else "", r["test"], r.get("local_mem", "?"),
                                        r.get("remote_mem", "?"), r.get("transport", "?"), kind)
        out.setdefault(key, []).append((int(r["size"]), float(y), bool(r.get("warning"))))
    return out


def plot(all_series, ylabel, title, path, log_y):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 6), dpi=110)
    sizes = set()
    for name, pts in all_series:
        pts.sort()
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        sizes.update(xs)
        line, = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.5, label=name)
        warned = [(x, y) for x, y, w in pts if w]
        if warned:
            ax.scatter([w[0] for w in warned], [w[1] for w in warned], marker="x", s=80, color="red", zorder=5)
    ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    ticks = sorted(sizes)
    if len(ticks) > 16:
        step = (len(ticks) + 15) // 16
        ticks = ticks[::step]
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks], rotation=45)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv):
    ap = argparse.ArgumentParser(description="Plot gdx_perftest JSON results.")
    ap.add_argument("results", nargs="+", help="JSON files written by gdx_perftest --json")
    ap.add_argument("-o", "--outdir", default=".", help="directory for the PNG files (default: .)")
    ap.add_argument("--prefix", default="gdx_perftest", help="file name prefix (default: gdx_perftest)")
    ap.add_argument("--labels", default="", help="comma-separated label per result file (default: file names)")
    args = ap.parse_args(argv)

    labels = args.labels.split(",") if args.labels else []
    if labels and len(labels) != len(args.results):
        print("plot_results.py: --labels has %d labels for %d files" % (len(labels), len(args.results)),
              file=sys.stderr)
        return 2
    multi = len(args.results) > 1
    bw, lat = [], []
    try:
        for i, path in enumerate(args.results):
            doc = load(path)
            label = labels[i] if labels else (os.path.splitext(os.path.basename(path))[0] if multi else "")
            bw += series(doc, label, BW_TESTS, lambda r: r.get("bw_GBps")).items()
            lat += series(doc, label, LAT_TESTS,
                          lambda r: (r.get("lat_us") or {}).get("avg") if isinstance(r.get("lat_us"), dict)
                          else None).items()
    except ValueError as e:
        print("plot_results.py: %s" % e, file=sys.stderr)
        return 1
    if not bw and not lat:
        print("plot_results.py: no rows with a positive bandwidth or latency in %s" % ", ".join(args.results),
              file=sys.stderr)
        return 1
    os.makedirs(args.outdir, exist_ok=True)
    written = []
    if bw:
        p = os.path.join(args.outdir, args.prefix + "-bandwidth.png")
        plot([(k, list(v)) for k, v in bw], "bandwidth (GB/s, 1e9 bytes/s)", "gdx_perftest: bandwidth vs size",
             p, log_y=True)
        written.append(p)
    if lat:
        p = os.path.join(args.outdir, args.prefix + "-latency.png")
        plot([(k, list(v)) for k, v in lat], "one-way latency (us, average)", "gdx_perftest: latency vs size",
             p, log_y=True)
        written.append(p)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
