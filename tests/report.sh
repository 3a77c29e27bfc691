#!/usr/bin/env bash
# The HTML report (`remat report`): its options and errors, and the page as headless
# Chromium renders it. From the rendered DOM, every strategy's memory timeline must be
# drawn with one point per schedule step, and the peaks, step counts, recomputations,
# offloads, budgets and lower limits it shows must equal what `remat plan --json` and
# `remat compare --json` print; every point of the peak-against-budget curves is planned
# again with `remat plan --budget` and must give the peak drawn. A screenshot is saved
# as $BUILD/report.png (docs/report.png is one, of resnet50).
# Prints "ok/FAIL/skip name" lines and "RESULT passed failed skipped".
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# refused NAME CODE PATTERN ARGS...: `remat report ARGS` exits with CODE (1 bad input, 3
# an output that cannot be written) and one "remat:" line that matches PATTERN, and
# writes no page.
refused() {
    local name=$1 code=$2 pat=$3; shift 3
    (cd "$tmp" && "$REMAT" report "$@" >"$tmp/out" 2>"$tmp/err"); local rc=$?
    if [ "$rc" -ne "$code" ]; then fail "$name" "exit $rc"
    elif [ "$(grep -c '^remat: ' "$tmp/err")" -ne 1 ] || ! grep -q -- "$pat" "$tmp/err"; then
        fail "$name" "stderr: $(cat "$tmp/err")"
    elif [ -e "$tmp/report.html" ]; then fail "$name" "wrote report.html"
    else ok "$name"; fi
}

REMAT=$(cd "$(dirname "$REMAT")" && pwd -P)/$(basename "$REMAT")
M="resnet18 --input-size 32x32 --batch 2"

if "$REMAT" report --help >"$tmp/out" && grep -q "usage: remat report" "$tmp/out" &&
   "$REMAT" --help | grep -q "report"; then ok "report help"
else fail "report help" "$(head -3 "$tmp/out")"; fi
refused "report: no model" 1 "no model given"
refused "report: unknown option" 1 "unknown option '--frob'" $M --frob
refused "report: bad points" 1 "'1' is not a whole number from 2" $M --points 1
refused "report: unknown strategy" 1 "unknown strategy 'magic'" $M --strategies approx-mc,magic
refused "report: zero budget" 1 "must be above zero" $M --budget 0
refused "report: five budgets" 1 "at most 4 budgets" $M --budget min --budget 1GB --budget 2GB \
    --budget 3GB --budget 4GB
refused "report: no -o value" 1 "option -o needs a value" $M -o
refused "report: unwritable" 3 "cannot write '$tmp/no/such/r.html'" $M -o "$tmp/no/such/r.html"
refused "report: unknown model" 1 "nosuchnet" nosuchnet

# Two pages: plans at the least budgets and at 153 MB (resnet18 at 32x32, batch 2, needs
# 152.2 to 152.7 MB), without kernels' scratch; and two strategies with the cpu backend's
# kernels, whose scratch the timeline draws.
budget=153000000
(cd "$tmp" && "$REMAT" report $M --budget min --budget $budget --points 6 -o a.html) \
    >"$tmp/a.out" 2>"$tmp/a.err"
want="report written to $(cd "$tmp" && pwd -P)/a.html"
if [ "$(cat "$tmp/a.out")" = "$want" ] && [ -s "$tmp/a.html" ]; then
    ok "report: prints its absolute path"
else fail "report: prints its absolute path" "$(cat "$tmp/a.out" "$tmp/a.err")"; fi
"$REMAT" report $M --strategies approx-mc,hybrid --backend cpu --points 3 -o "$tmp/b.html" \
    >/dev/null 2>"$tmp/b.err" || fail "report: cpu backend" "$(cat "$tmp/b.err")"
# nothing fetched when the page is viewed: no external scripts, styles, images or fonts
if [ -s "$tmp/a.html" ] && ! grep -Eiq '(src|href)="(https?:)?//|@import|url\(' "$tmp/a.html"; then
    ok "report: self-contained"
else
    fail "report: self-contained" \
        "$(grep -Eio '(src|href)="[^"]*"|@import|url\([^)]*\)' "$tmp/a.html" | head -3)"
fi

browser=""
for b in chromium chromium-browser google-chrome; do
    command -v "$b" >/dev/null && { browser=$b; break; }
done
chrome() {
    local sandbox=""
    [ "$(id -u)" = 0 ] && sandbox=--no-sandbox
    timeout 120 "$browser" --headless $sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$tmp/chrome" "$@" 2>>"$tmp/chrome.log"
}

if [ -z "$browser" ]; then
    skip "report: rendered in chromium" "no chromium (tools/setup.sh installs it)"
    echo "RESULT $passed $failed $skipped"
    exit 0
fi
for p in a b; do
    if chrome --dump-dom "file://$tmp/$p.html" >"$tmp/$p.dom" && [ -s "$tmp/$p.dom" ]; then
        ok "report: chromium renders page $p"
    else fail "report: chromium renders page $p" "$(tail -3 "$tmp/chrome.log")"; fi
done

# check.py REMAT DOM MODEL-ARGS PLAN-ARGS BUDGETS [STRATEGIES]: a line "ok NAME" or
# "FAIL NAME: WHY" per check (STRATEGIES: the page's, comma-separated; default all but
# optimal).
cat >"$tmp/check.py" <<'EOF'
import html.parser, json, re, subprocess, sys

remat, dom, model, extra = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
budgets = sys.argv[5].split()

class Page(html.parser.HTMLParser):
    """Charts, lanes, table rows and cards by section (b<k>-<strategy>)."""
    def __init__(self):
        super().__init__()
        self.card = None; self.svg = None
        self.charts, self.cards, self.rows, self.series = {}, {}, [], []
        self.section, self.kind = -1, None
    def handle_starttag(self, tag, a):
        a = dict(a)
        if tag == 'h2' and a.get('id', '').startswith('budget-'):
            self.section = int(a['id'][7:])
        if tag == 'article':
            self.card = a['id']; self.cards[a['id']] = a
        elif tag == 'svg' and a.get('class') == 'timeline':
            self.svg = self.charts[self.card] = {'svg': a, 'lanes': {}}
        elif self.svg is not None and tag == 'polyline':
            self.svg['line'] = a
        elif self.svg is not None and tag == 'path' and a.get('class') == 'scratch':
            self.svg['scratch'] = a
        elif self.svg is not None and tag == 'circle':
            self.svg['peak'] = a
        elif self.svg is not None and tag == 'g' and 'data-kind' in a:
            self.svg['lanes'][a['data-kind']] = int(a['data-count'])
        elif tag == 'div' and a.get('class') == 'values':
            self.charts[self.card]['values'] = a
        elif tag == 'tr' and 'data-strategy' in a:
            self.rows.append((self.section, a))
        elif tag == 'svg' and a.get('class') == 'curves':
            self.kind = a['data-kind']
        elif tag == 'polyline' and a.get('class') == 'series':
            self.series.append((self.kind, a))
    def handle_endtag(self, tag):
        if tag == 'svg': self.svg = None
        if tag == 'article': self.card = None

def run(*args):
    p = subprocess.run([remat, *args], capture_output=True, text=True)
    return json.loads(p.stdout) if p.returncode == 0 else None

def check(name, good, why):
    print(('ok   %s' if good else 'FAIL %s: ' + why) % name, flush=True)

page = Page(); page.feed(open(dom).read())
names = ['none', 'approx-tc', 'approx-mc', 'exact-tc', 'exact-mc', 'chen-sqrtn', 'chen-greedy',
         'superneurons', 'hybrid']   # the report's default: all but optimal (the MILP)
compare = {} if extra else {c['strategy']: c for c in
                            run('compare', *model, '--strategies', ','.join(names), '--json')}
strategies = sys.argv[6].split(',') if len(sys.argv) > 6 else names
scratch_seen = 0
for k, b in enumerate(budgets):
    for s in strategies:
        name = 'report %s at %s: %s' % (' '.join(model[:1] + extra), b, s)
        j = run('plan', *model, *extra, '--strategy', s, '--budget', b, '--json')
        card, chart = page.cards.get('b%d-%s' % (k, s)), page.charts.get('b%d-%s' % (k, s))
        if j is None or card is None:
            check(name, j is None and card is not None and card['data-feasible'] == 'false',
                  'plan %s, card %s' % ('fails' if j is None else 'plans', card))
            continue
        if chart is None:
            check(name, False, 'no chart drawn'); continue
        line, svg = chart['line'], chart['svg']
        pts = [tuple(map(float, p.split(','))) for p in line['points'].split()]
        got = dict(points=int(line['data-points']), parsed=len(pts),
                   drawn=int(line.get('data-drawn-points', -1)), steps=int(svg['data-steps']),
                   peak=int(svg['data-peak']), line_peak=int(line['data-peak']),
                   recompute=chart['lanes']['recompute'], offload=chart['lanes']['offload'],
                   lower=int(svg['data-lower']), budget=int(svg['data-budget']),
                   values_offloaded=int(chart['values']['data-offloaded']),
                   values_recomputed=int(chart['values']['data-recomputed']) > 0)
        want = dict(points=j['n_steps'], parsed=j['n_steps'], drawn=j['n_steps'],
                    steps=j['n_steps'], peak=j['activation_peak_bytes'],
                    line_peak=j['activation_peak_bytes'], recompute=j['n_recomputed'],
                    offload=j['offloaded_values'], lower=j['lower_bound_bytes'],
                    budget=j['activation_budget_bytes'], values_offloaded=j['offloaded_values'],
                    values_recomputed=j['n_recomputed'] > 0)
        diff = {key: (got[key], want[key]) for key in want if got[key] != want[key]}
        # the line's highest point is where the peak's dot is drawn
        top = min(y for _, y in pts)
        if abs(top - float(chart['peak']['cy'])) > 0.051:
            diff['dot'] = (chart['peak']['cy'], top)
        check(name, not diff, 'drawn != plan --json: %s' % diff)
        scratch_seen += int(chart['scratch']['data-count'])
        if k == 0 and b == "min" and not extra:
            c = compare[s]
            row = [a for sec, a in page.rows if sec == 0 and a['data-strategy'] == s]
            check('report table: ' + s, c['feasible'] and len(row) == 1 and
                  int(row[0]['data-peak']) == c['activation_peak_bytes'],
                  'table %s, compare --json %s' % (row, c.get('activation_peak_bytes')))
if '--backend' in extra:
    check('report: scratch drawn', scratch_seen > 0, 'no step with scratch')
# the sweep: every point planned again, the first at the strategy's least budget (min),
# the others at their budgets; the step-time chart has the same points
times = {a['data-strategy']: a['data-x'] for kind, a in page.series if kind == 'time'}
for a in (a for kind, a in page.series if kind == 'peak'):
    s, n = a['data-strategy'], int(a['data-points'])
    xs, ys = a['data-x'].split(), a['data-y'].split()
    bad = [(x, y) for i, (x, y) in enumerate(zip(xs, ys))
           if (run('plan', *model, *extra, '--strategy', s, '--budget', 'min' if i == 0 else x,
                   '--json') or {}).get('activation_peak_bytes') != int(y)]
    check('report sweep: ' + s, n == len(xs) == len(ys) == len(a['points'].split()) ==
          int(a.get('data-drawn-points', -1)) and n >= 1 and not bad and
          times.get(s) == a['data-x'], '%d points, %d budgets, drawn %s; plan disagrees at '
          '%s; time chart %s' % (n, len(xs), a.get('data-drawn-points'), bad[:3], times.get(s)))
EOF

results() {
    while IFS= read -r line; do
        case "$line" in "ok   "*) ok "${line#ok   }" ;;
            "FAIL "*) r=${line#FAIL }; fail "${r%%: *}" "${r#*: }" ;;
            *) fail "report check" "$line" ;; esac
    done
}
[ -s "$tmp/a.dom" ] &&
    results < <("$PY" "$tmp/check.py" "$REMAT" "$tmp/a.dom" "$M" "" "min $budget" 2>&1)
[ -s "$tmp/b.dom" ] &&
    results < <("$PY" "$tmp/check.py" "$REMAT" "$tmp/b.dom" "$M" "--backend cpu" "min" \
                none,approx-mc,hybrid 2>&1)

# the screenshot: a PNG of the laptop-sized window
shot="$BUILD/report.png"
png_ok="import struct, sys; d = open(sys.argv[1], 'rb').read(24)
print(d[:8] == b'\x89PNG\r\n\x1a\n' and struct.unpack('>II', d[16:24]) == (1280, 1600))"
if chrome --window-size=1280,1600 --screenshot="$shot" "file://$tmp/a.html" >/dev/null &&
   [ "$("$PY" -c "$png_ok" "$shot")" = True ]; then
    ok "report: screenshot $shot"
else fail "report: screenshot" "$(tail -3 "$tmp/chrome.log")"; fi

echo "RESULT $passed $failed $skipped"
