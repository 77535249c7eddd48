#!/usr/bin/env bash
# Screenshots of a `snakemake --report` file as a reader sees it in a browser: headless Chromium
# opens the report and shows one result (the sidebar with its description, the page with the
# table or figure, its caption and notes), one PNG per result.
#
#   tools/report_screenshots.sh REPORT.html OUT_DIR [RESULT ...]
#
# RESULT is a result's path as the report lists it (e.g. results/tables/image.html); default:
# every table and figure page of the report. The report has no links to a result, so each shot
# opens a copy of it (in a temporary folder) whose last script calls the report's own
# app.setView, as a click on the result's eye button does. Needs Chromium (Debian:
# `apt-get install -y chromium`; CHROMIUM=/path/to/chrome to use another) and python3.
# docs/report.md shows the shots of the embedded default.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
report=$(realpath "$1")
out=$2
shift 2
chromium=${CHROMIUM:-chromium}
command -v "$chromium" > /dev/null || { echo "report_screenshots: $chromium not found; install it (apt-get install -y chromium) or set CHROMIUM" >&2; exit 1; }
[[ -f $report ]] || { echo "report_screenshots: $report not found; make it with snakemake --report $1" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ $# -eq 0 ]]; then
    # Every table and figure page the report holds, in its own order.
    mapfile -t results < <(python3 - "$report" <<'EOF'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
block = re.search(r'<script id="results">\s*var results = (\{.*?\});?\s*</script>', text, re.S)
for path in json.loads(block.group(1)):
    if re.search(r"/(tables|figures)/[^/]+\.html$", path):
        print(path)
EOF
)
else
    results=("$@")
fi

for result in "${results[@]}"; do
    name=$(basename "$(dirname "$result")")_$(basename "$result" .html)
    view="$work/$name.html"
    # A copy of the report that opens RESULT once it has loaded.
    python3 - "$report" "$view" "$result" <<'EOF'
import json, sys
source, target, result = sys.argv[1:]
text = open(source, encoding="utf-8").read()
opener = (
    "<script>window.addEventListener('load', function () { setTimeout(function () {"
    f" var key = {json.dumps(result)};"
    " if (!(key in results)) { document.title = 'NO RESULT ' + key; return; }"
    " app.setView({navbarMode: 'resultinfo', resultPath: key, content: 'html', contentPath: results[key].data_uri});"
    " }, 50); });</script>"
)
if result not in text:
    sys.exit(f"report_screenshots: {result} is not a result of {source}")
head, tail = text.rsplit("</body>", 1)
open(target, "w", encoding="utf-8").write(head + opener + "</body>" + tail)
EOF
    # A fresh profile per shot; no network, no first-run or sync machinery.
    "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
        --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$work/profile-$name" \
        --window-size=2500,960 --virtual-time-budget=5000 --screenshot="$out/$name.png" "file://$view" 2> "$work/$name.log" \
        || { cat "$work/$name.log" >&2; exit 1; }
    echo "report_screenshots: $out/$name.png ($result)"
done
