import sys, re, collections
# usage: cgparse.py FILE [regex...]: per function: self Ir, calls (as callee), inclusive Ir per call
def parse(path):
    names = {}; selfc = collections.Counter(); calls = collections.Counter(); incl = collections.Counter()
    fn = None; pending = None; cfn = None
    def name(tok, kind):
        m = re.match(r'\((\d+)\)(?:\s+(.*))?', tok)
        if m:
            if m.group(2): names[(kind, m.group(1))] = m.group(2)
            return names.get((kind, m.group(1)), m.group(1))
        return tok
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if line.startswith('fn='): fn = name(line[3:], 'fn'); continue
        if line.startswith('cfn=') or line.startswith('cfi=') or line.startswith('cob='):
            if line.startswith('cfn='): cfn = name(line[4:], 'fn')
            continue
        if line.startswith('calls='): pending = int(line[6:].split()[0]); continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            parts = line.split()
            c = int(parts[1]) if len(parts) > 1 else 0
            if pending is not None:
                calls[cfn] += pending; incl[cfn] += c; pending = None
            else:
                selfc[fn] += c
    return selfc, calls, incl
selfc, calls, incl = parse(sys.argv[1])
pats = [re.compile(p) for p in sys.argv[2:]] or [re.compile('.')]
rows = []
for f in set(selfc) | set(calls):
    if any(p.search(f) for p in pats):
        n = calls[f]
        rows.append((selfc[f], f, n, incl[f] / n if n else 0, selfc[f] / n if n else 0))
for s, f, n, ipc, spc in sorted(rows, reverse=True)[:60]:
    print(f"{s:>10} {n:>8} incl/call {ipc:8.1f} self/call {spc:7.1f}  {f[:110]}")
