#!/usr/bin/env bash
# The many-core rows (ingest, training and encoding on 16 cores) in one go, about 6 minutes:
# build bpestore (aborts unless every compiled core says "compiled"), then
# `python -m bench.many_cores` (ingest by workers and vs HF with peak PSS, cold
# ingest + train 32k with the GPT-2 and cl100k patterns, on all cores and pinned to 2,
# ten files vs one, fixed costs of the commands, day 2, 400 MB, 10,000 files: as many
# of them, and as many runs, as the budget allows), the machine's own scaling
# (`python -m bench.cpu_ceiling`, lscpu), then `python -m bench encode-peers` where that
# suite exists. The table comes last on stdout; everything
# else is under $OUT: many_cores.json, summary.md, many_cores.log, build.log,
# encode_peers.md, phases.md, cpu_ceiling.md, lscpu.txt.
#
# Run from the repository root, sqlalchemy and alembic importable (e.g. PYTHONPATH),
# the corpora in .devdata/ or ../shared/corpora. Settings (environment):
#   OUT                 where the results go (default: a new temporary folder)
#   MANY_CORES_CORPUS   the corpus (default english_100M; english_medium for a quick try)
#   MANY_CORES_RUNS     at most this many runs per row (default 3)
#   MANY_CORES_TOTAL    seconds for the whole script (default 345)
#   MANY_CORES_ONLY     comma-separated row names of bench.many_cores (default: all)
#   PYTHON              the interpreter (default python3)
set -u
T0=$(date +%s)
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d)}
CORPUS=${MANY_CORES_CORPUS:-english_100M}
RUNS=${MANY_CORES_RUNS:-3}
TOTAL=${MANY_CORES_TOTAL:-345}
ENCODE_RESERVE=${MANY_CORES_ENCODE_RESERVE:-90}  # seconds kept for encode-peers
mkdir -p "$OUT"
LOG="$OUT/many_cores.log"
say() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$LOG" >&2; }
die() { say "ABORT: $*"; exit 1; }

# -- corpora ----------------------------------------------------------------------------------
if [ -d .devdata ]; then
    export BPESTORE_CORPORA="$PWD/.devdata"
    # The tests look in ../shared/corpora: make it where nothing is there.
    [ -e ../shared/corpora ] || { mkdir -p ../shared && ln -sfn "$PWD/.devdata" ../shared/corpora; } 2>/dev/null
elif [ -d ../shared/corpora ]; then
    export BPESTORE_CORPORA="$(cd ../shared/corpora && pwd)"
else
    die "no corpora: neither .devdata/ nor ../shared/corpora here ($PWD)"
fi
ls "$BPESTORE_CORPORA/$CORPUS".txt* >/dev/null 2>&1 || die "no $CORPUS.txt[.xz] in $BPESTORE_CORPORA"
for f in tinyshakespeare.txt cl100k_base.tiktoken o200k_base.tiktoken gpt2_merges.txt; do
    [ -e "$BPESTORE_CORPORA/$f" ] || say "no $f in $BPESTORE_CORPORA: encode-peers will stop short"
done
say "corpora: $BPESTORE_CORPORA; corpus $CORPUS; $(nproc) cores; $($PY --version 2>&1)"

# -- build: the editable install, else the cores compiled in place ----------------------------
say "building bpestore"
PIP="$PY -m pip install --no-deps --no-build-isolation --no-index -e ."
if ! $PIP >"$OUT/build.log" 2>&1; then
    if grep -q externally-managed "$OUT/build.log"; then
        $PIP --break-system-packages >>"$OUT/build.log" 2>&1 || say "pip install failed (see build.log)"
    else
        say "pip install failed (see build.log); compiling the cores in place"
    fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! $PY -c "import bpestore._mergecore, bpestore._countcore" 2>/dev/null; then
    say "compiling the cores with gcc"
    INC=$($PY -c "import sysconfig; print(sysconfig.get_paths()['include'])")
    EXT=$($PY -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    for c in bpestore/_*core.c; do
        gcc -O3 -DNDEBUG -fPIC -shared -pthread -I"$INC" "$c" -o "${c%.c}$EXT" >>"$OUT/build.log" 2>&1 \
            || say "gcc failed on $c (see build.log)"
    done
fi
VERSION=$($PY -m bpestore --version 2>&1)
echo "$VERSION" | tee -a "$LOG"
echo "$VERSION" | grep -q "core:" || die "bpestore --version names no compiled core: $VERSION"
if echo "$VERSION" | grep "core:" | grep -qv "compiled"; then
    die "a core is not compiled (see $OUT/build.log)"
fi
for m in tokenizers psutil sqlalchemy alembic click regex; do
    $PY -c "import $m" 2>/dev/null || die "cannot import $m (PYTHONPATH=$PYTHONPATH)"
done
command -v taskset >/dev/null || say "no taskset: the pinned row will fail"

# -- the rows ---------------------------------------------------------------------------------
BUDGET=$(( TOTAL - ($(date +%s) - T0) - ENCODE_RESERVE ))
say "rows: $BUDGET s budget"
# A row may run past its estimate: it can take the encode reserve, never more.
timeout -k 5 $(( BUDGET + ENCODE_RESERVE - 5 )) $PY -m bench.many_cores --out "$OUT" --corpus "$CORPUS" --runs "$RUNS" \
    --budget "$BUDGET" ${MANY_CORES_ONLY:+--only "$MANY_CORES_ONLY"} >/dev/null 2>>"$LOG"
say "rows done (exit $?)"

# -- what the machine itself allows: its CPUs, and N processes of fixed work ----------------------
lscpu >"$OUT/lscpu.txt" 2>&1 || true
timeout -k 5 60 $PY -m bench.cpu_ceiling --procs "1,2,4,8,$(nproc)" --runs 1 >"$OUT/cpu_ceiling.md" 2>>"$LOG" \
    || say "cpu_ceiling did not finish"

# -- the encoder against its peers, where that suite exists -------------------------------------
LEFT=$(( TOTAL - ($(date +%s) - T0) ))
HELP=$($PY -m bench --help 2>/dev/null)
if echo "$HELP" | grep -q "encode-peers" && [ "$LEFT" -gt 15 ]; then
    if echo "$HELP" | grep -q -- "--threads"; then THREADS="--quick --runs 3 --threads 1,2,4,8,$(nproc)"; else THREADS="--runs 1 --workers 1,$(nproc)"; fi
    say "encode-peers ($THREADS), $LEFT s left"
    timeout -k 5 $(( LEFT - 5 )) $PY -m bench encode-peers --corpus english_medium $THREADS \
        >"$OUT/encode_peers.md" 2>>"$LOG" || true
    say "encode-peers done"
else
    say "no encode-peers suite (or no time): skipped"
fi

say "done; results in $OUT"
[ -s "$OUT/encode_peers.md" ] && tail -n 25 "$OUT/encode_peers.md"
echo
cat "$OUT/summary.md" 2>/dev/null || echo "no summary.md (see $LOG)"
