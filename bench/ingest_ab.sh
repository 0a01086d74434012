#!/usr/bin/env bash
# What a change costs ingest, in instructions (callgrind, every process: deterministic on a
# loaded machine, where wall times of one run are not): ingest the first MB of a corpus into a
# fresh SQLite store with 1 and with 4 workers, at git REF (built in a temporary folder) and in
# this checkout (built in place). Prints one line per row and the ratio.
#
#   bench/ingest_ab.sh main                 # e.g. the ordinals' cost (issue 34)
# Settings (environment): AB_MB (default 20), AB_CORPUS (default ../shared/corpora/english_100M.txt.xz),
# PYTHON (default python3; sqlalchemy and alembic importable).
set -eu
REF=${1:?usage: bench/ingest_ab.sh GIT_REF}
PY=${PYTHON:-python3}
MB=${AB_MB:-20}
CORPUS=${AB_CORPUS:-../shared/corpora/english_100M.txt.xz}
HERE=$(pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/base" && git archive "$REF" | tar -x -C "$WORK/base"
(cd "$WORK/base" && $PY -c "from setuptools import setup; setup()" build_ext --inplace -q >/dev/null 2>&1)
$PY -c "from setuptools import setup; setup()" build_ext --inplace -q >/dev/null 2>&1
xz -dc "$CORPUS" | head -c $((MB * 1000000)) > "$WORK/text.txt"
cat > "$WORK/ingest.py" <<'PY'
import sys, tempfile
import bpestore
with tempfile.TemporaryDirectory() as d:
    s = bpestore.open(f"sqlite:///{d}/s.db")
    s.ingest("c", [sys.argv[1]], workers=int(sys.argv[2]))
    s.close()
PY
instructions() {  # PYTHONPATH, workers -> total Ir of every process
    rm -f "$WORK"/cg.*
    PYTHONPATH="$1" valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$WORK/cg.%p" \
        $PY "$WORK/ingest.py" "$WORK/text.txt" "$2" >/dev/null 2>&1
    cat "$WORK"/cg.* | awk '/^summary:/ {s += $2} END {print s}'
}
for workers in 1 4; do
    base=$(instructions "$WORK/base" $workers)
    here=$(instructions "$HERE" $workers)
    echo "ingest ${MB} MB, $workers worker(s): $REF $base Ir, this checkout $here Ir, ratio $(echo "scale=3; $here / $base" | bc)"
done
