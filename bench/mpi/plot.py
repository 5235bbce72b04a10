#!/usr/bin/env python3
"""Plot gdx_mpi_bench CSVs (--csv FILE) to PNG: one panel per test, one line per series (the CSV's label column,
else the file name), median over the files of one series at each size. Axes: size (log2), latency in us (log) or
MB/s (log).

  bench/mpi/plot.py -o out.png gdx-r1.csv gdx-r2.csv ucx-r1.csv ucx-r2.csv
  bench/mpi/plot.py -o out.png --test bw,lat DIR/*.csv

Needs python3-matplotlib (Debian package)."""
import argparse
import csv
import os
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('csv', nargs='+', help='gdx_mpi_bench --csv files')
    ap.add_argument('-o', '--output', default='gdx_mpi_bench.png', help='PNG to write (default %(default)s)')
    ap.add_argument('--test', default='', help='tests to plot, comma-separated (default: all in the files)')
    ap.add_argument('--title', default='', help='figure title')
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        # Debian's python3-matplotlib is for /usr/bin/python3; another python3 first on PATH (pyenv, venv) lacks it
        if os.path.realpath(sys.executable) != os.path.realpath('/usr/bin/python3') and \
                os.access('/usr/bin/python3', os.X_OK) and not os.environ.get('GDX_PLOT_REEXEC'):
            os.environ['GDX_PLOT_REEXEC'] = '1'
            os.execv('/usr/bin/python3', ['/usr/bin/python3'] + sys.argv)
        sys.exit('plot.py: matplotlib missing (apt-get install python3-matplotlib)')

    data = {}  # (test, series) -> size -> [values]
    units = {}
    for path in args.csv:
        with open(path, newline='') as f:
            for row in csv.DictReader(f):
                series = row.get('label') or os.path.splitext(os.path.basename(path))[0]
                series = '%s %s->%s np%s' % (series, row['smem'], row['rmem'], row['ranks'])
                data.setdefault((row['test'], series), {}).setdefault(int(row['size']), []).append(float(row['value']))
                units[row['test']] = row['unit']
    order = ['lat', 'bw', 'bibw', 'mbw_mr']
    tests = [t for t in (args.test.split(',') if args.test else order) if t in units]
    tests += [t for t in units if t not in tests and not args.test]
    if not tests:
        sys.exit('plot.py: no rows for the tests asked')
    fig, axes = plt.subplots(len(tests), 1, figsize=(9, 3.6 * len(tests)), squeeze=False)
    for ax, test in zip(axes[:, 0], tests):
        for (t, series), by_size in sorted(data.items()):
            if t != test:
                continue
            sizes = sorted(by_size)
            ax.plot(sizes, [statistics.median(by_size[s]) for s in sizes], marker='o', markersize=3, label=series)
        ax.set_xscale('log', base=2)
        ax.set_yscale('log')
        ax.set_xlabel('message size (bytes)')
        ax.set_ylabel('%s (%s)' % (test, units[test]))
        ax.set_title('%s: %s' % (test, 'lower is better' if test == 'lat' else 'higher is better'))
        ax.grid(True, which='both', alpha=0.3)
        ax.legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print('plot.py: wrote %s' % args.output)


if __name__ == '__main__':
    main()
