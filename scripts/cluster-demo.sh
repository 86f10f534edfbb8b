#!/usr/bin/env bash
# A two-node launch on one machine (127.0.0.1): two decode workers that join the job's
# directory, and two trainer ranks started as torchrun would (RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT) with `--directory auto`: rank 0 hosts the directory at
# MASTER_PORT + 1, both ranks decode on the workers it lists. Uses the demo images
# (generated once, like scripts/demo.sh). Prints each rank's JSON summary and the
# per-worker figures. Extra arguments go to both ranks' `brigade run`.
#   scripts/cluster-demo.sh [--batch-size 64 --epochs 2 ...]
set -euo pipefail
cd "$(dirname "$0")/.."
brigade=build/launch/brigade
if [ ! -x "$brigade" ]; then
  bash scripts/install-deps.sh
  # One compiler cache per user, shared by every checkout (see scripts/test.sh).
  export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/brigade/ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBRIGADE_MODULES="actors;media;transport;launch" >/dev/null
  cmake --build build -j"${JOBS:-$(nproc)}" --target brigade
fi
demo="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/brigade/demo"
if [ ! -f "$demo/.complete" ]; then
  echo "cluster-demo: generating the demo dataset in $demo" >&2
  "$brigade" run --stop-after-batches 1 --no-progress >/dev/null
fi

tmp=$(mktemp -d /tmp/brigade-cluster-demo.XXXXXX)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The job token: a file only its owner reads (never on argv, never in the environment
# of every process here).
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token")

# torchrun's rendezvous: MASTER_PORT; the directory listens on MASTER_PORT + 1.
export MASTER_ADDR=127.0.0.1
export MASTER_PORT=${MASTER_PORT:-$((20000 + RANDOM % 20000))}
export WORLD_SIZE=2
directory="$MASTER_ADDR:$((MASTER_PORT + 1))"
echo "cluster-demo: directory at $directory (rank 0), logs in $tmp" >&2

for w in 0 1; do
  "$brigade" worker --listen 127.0.0.1:0 --join "$directory" --threads 1 \
    --token-file "$tmp/token" >"$tmp/worker$w.out" 2>"$tmp/worker$w.log" &
  pids+=("$!")
done
for r in 0 1; do
  RANK=$r "$brigade" run --data "$demo/images" --directory auto --token-file "$tmp/token" \
    --threads 1 --no-progress --json "$@" >"$tmp/rank$r.json" 2>"$tmp/rank$r.log" &
  ranks[r]=$!
  pids+=("$!")
done
status=0
for r in 0 1; do
  code=0
  wait "${ranks[r]}" || code=$?
  [ "$code" = 0 ] || { status=1 && echo "cluster-demo: rank $r exited $code" >&2 && tail -n 20 "$tmp/rank$r.log" >&2; }
done

pretty() {
  if command -v jq >/dev/null; then jq .; elif command -v python3 >/dev/null; then python3 -m json.tool; else cat; fi
}
for r in 0 1; do
  echo "== rank $r (RANK=$r WORLD_SIZE=2) summary"
  tail -n 1 "$tmp/rank$r.json" | pretty
done
echo "== per-worker figures, as each rank saw them"
for r in 0 1; do
  grep -E 'brigade: remote:|brigade:   worker' "$tmp/rank$r.log" | sed -E "s/^.*(brigade: )/rank $r: /" || true
done
for w in 0 1; do kill -TERM "${pids[w]}" 2>/dev/null || true; done
for w in 0 1; do wait "${pids[w]}" 2>/dev/null || true; done
echo "== workers, on stopping"
for w in 0 1; do
  echo "worker $w ($(head -n 1 "$tmp/worker$w.out")): $(grep -o 'stopping: .*' "$tmp/worker$w.log" || echo 'no summary')"
done
exit $status
