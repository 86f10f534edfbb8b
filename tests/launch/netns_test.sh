#!/usr/bin/env bash
# Remote decode across network namespaces (CTest launch.netns, label netns): the trainer
# in the root namespace, two `brigade worker`s each in its own namespace, reached over
# one veth pair per namespace (10.231.X.0/30 and 10.231.X.4/30, addresses this test
# creates; no routing, no forwarding). Phase 1: the remote run's ids and digests equal a
# local run's. Phase 2: worker 1's link is cut mid-run with blackhole routes on both
# sides (never a link taken down, never an address removed: packets would then leave by
# the default route); the run still delivers every sample exactly once, byte-identical
# to the local run, its lost batches sent again to worker 2.
# Usage: netns_test.sh BRIGADE_BINARY. Exit 77 (skipped) only when `ip netns add` is
# refused (not root, no CAP_SYS_ADMIN) or a new namespace cannot be entered (a chroot).
# Everything it creates is deleted by the trap.
set -uo pipefail
brigade=$(realpath "${1:?usage: netns_test.sh BRIGADE_BINARY}")
start=$SECONDS
p="brg$$"  # the prefix of every namespace and link of this run (names ≤ 15 characters)
tmp=$(mktemp -d /tmp/brigade-netns.XXXXXX)
namespaces=() links=() blackholes=() ns_blackholes=() pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  local l r
  for l in "${links[@]}"; do ip link del "$l" 2>/dev/null; done
  for r in "${ns_blackholes[@]}"; do ip -n "${r% *}" route del blackhole "${r#* }" 2>/dev/null; done
  for r in "${blackholes[@]}"; do ip route del blackhole "$r" 2>/dev/null; done
  for l in "${namespaces[@]}"; do ip netns del "$l" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "netns_test: FAIL: $*" >&2
  for f in "$tmp"/*.err "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}
run() { timeout -k 5 "$1" "${@:2}"; }
# The figures of worker $2 in the JSON summary $1 (nlohmann sorts keys: "worker" is last).
figures() { grep -o "{[^{}]*\"worker\":\"$2\"}" "$1"; }

if ! ip netns add "$p-w1" 2>"$tmp/netns.err"; then
  echo "netns_test: SKIP: 'ip netns add' failed ($(cat "$tmp/netns.err")): needs root" >&2
  exit 77
fi
namespaces+=("$p-w1")
# A chroot (a fresh-root CI check) may add namespaces but not enter them: `ip` cannot
# remount / there. Then namespaces are not usable here at all: skip, saying why.
if ! ip netns exec "$p-w1" true 2>"$tmp/netns.err"; then
  echo "netns_test: SKIP: a namespace cannot be entered here ($(cat "$tmp/netns.err"))" >&2
  exit 77
fi
ip netns add "$p-w2" || fail "ip netns add $p-w2"
namespaces+=("$p-w2")

# A /29 of 10.231.0.0/16 that no route of this machine covers yet.
net=""
for i in $(seq 0 63); do
  x=$(((RANDOM + i) % 250 + 1))
  if [ -z "$(ip route show match "10.231.$x.0/29" | grep -v '^default')" ] &&
    [ -z "$(ip -o addr show to "10.231.$x.0/29")" ]; then net="10.231.$x" && break; fi
done
[ -n "$net" ] || fail "no free 10.231.X.0/29"
host=()  # host[n]: the root side of worker n's link; ns[n]: the worker's
ns=()
for n in 1 2; do
  host[n]="$net.$((4 * (n - 1) + 1))" ns[n]="$net.$((4 * (n - 1) + 2))"
  ip link add "$p-h$n" type veth peer name "$p-n$n" || fail "veth $p-h$n"
  links+=("$p-h$n")
  ip link set "$p-n$n" netns "$p-w$n" || fail "move $p-n$n"
  ip addr add "${host[n]}/30" dev "$p-h$n" && ip link set "$p-h$n" up || fail "root side $n"
  ip -n "$p-w$n" addr add "${ns[n]}/30" dev "$p-n$n" && ip -n "$p-w$n" link set "$p-n$n" up &&
    ip -n "$p-w$n" link set lo up || fail "namespace side $n"
done

# 96 JPEGs of 640×480 (ffmpeg's test pattern: every frame differs).
mkdir -p "$tmp/data"
ffmpeg -loglevel error -f lavfi -i testsrc=size=640x480:rate=25 -frames:v 96 -q:v 3 \
  "$tmp/data/img-%03d.jpg" || fail "ffmpeg could not make the dataset"
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token")

for n in 1 2; do
  ip netns exec "$p-w$n" "$brigade" worker --listen "${ns[n]}:0" --threads 1 \
    --token-file "$tmp/token" >"$tmp/worker$n.out" 2>"$tmp/worker$n.log" &
  pids+=("$!")
done
addr=()
for n in 1 2; do
  for _ in $(seq 100); do
    addr[n]=$(head -n 1 "$tmp/worker$n.out")
    [ -n "${addr[n]}" ] && break
    sleep 0.05
  done
  [[ "${addr[n]}" == "${ns[n]}":* ]] || fail "worker $n did not print its address (got '${addr[n]}')"
done
echo "netns_test: workers at ${addr[1]} ($p-w1) and ${addr[2]} ($p-w2)" >&2

common=(--data "$tmp/data" --batch-size 4 --seed 3 --epochs 10 --no-progress --threads 2)
remote=(--workers "${addr[1]},${addr[2]}" --token-file "$tmp/token" --on-no-workers fail
  --remote-inflight 2 --json)
run 40 "$brigade" run "${common[@]}" --ids-out "$tmp/local.ids" --digests-out "$tmp/local.digests" \
  >/dev/null 2>"$tmp/local.err" || fail "local run"
total=$(wc -l <"$tmp/local.ids")
[ "$total" = $((10 * 96)) ] || fail "local run delivered $total ids"

# Phase 1: both workers, every link up.
t0=$SECONDS
run 40 "$brigade" run "${common[@]}" "${remote[@]}" --ids-out "$tmp/p1.ids" \
  --digests-out "$tmp/p1.digests" >"$tmp/p1.json" 2>"$tmp/p1.err" || fail "phase 1 run"
cmp -s "$tmp/local.digests" "$tmp/p1.digests" || fail "phase 1 digests differ from the local run's"
cmp -s "$tmp/local.ids" "$tmp/p1.ids" || fail "phase 1 ids differ from the local run's"
for n in 1 2; do
  figures "$tmp/p1.json" "${addr[n]}" | grep -q '"live":true.*"tasks":[1-9]' ||
    fail "phase 1: worker $n did no tasks: $(cat "$tmp/p1.json")"
done
echo "netns_test: phase 1 ok: $total samples, remote == local ($((SECONDS - t0)) s)" >&2

# Phase 2: cut worker 1 half a second after the trainer's session with it opened (the
# ids and digests files are written at the end, so they cannot tell the progress).
t0=$SECONDS
sessions=$(grep -c 'session opened' "$tmp/worker1.log")
run 45 "$brigade" run "${common[@]}" "${remote[@]}" --ids-out "$tmp/p2.ids" \
  --digests-out "$tmp/p2.digests" >"$tmp/p2.json" 2>"$tmp/p2.err" &
trainer=$!
pids+=("$trainer")
for _ in $(seq 200); do
  [ "$(grep -c 'session opened' "$tmp/worker1.log")" -gt "$sessions" ] && break
  sleep 0.025
done
sleep 0.5
kill -0 "$trainer" 2>/dev/null || fail "phase 2 ended before the cut"
ip route add blackhole "${ns[1]}/32" || fail "blackhole ${ns[1]} in the root namespace"
blackholes+=("${ns[1]}/32")
ip -n "$p-w1" route add blackhole "${host[1]}/32" || fail "blackhole ${host[1]} in $p-w1"
ns_blackholes+=("$p-w1 ${host[1]}/32")
echo "netns_test: cut ${addr[1]} at $((SECONDS - t0)) s into the run" >&2
wait "$trainer" || fail "phase 2 run exited $?"
cmp -s "$tmp/local.digests" "$tmp/p2.digests" || fail "phase 2 digests differ from the local run's"
dups=$(sort -n "$tmp/p2.ids" | uniq -c | awk '$1 != 10' | wc -l)
[ "$dups" = 0 ] && [ "$(wc -l <"$tmp/p2.ids")" = "$total" ] ||
  fail "phase 2: not every sample exactly once per epoch ($dups ids off)"
figures "$tmp/p2.json" "${addr[1]}" | grep -q '"live":false,"lost":[1-9]' ||
  fail "phase 2: the cut worker is not reported lost: $(cat "$tmp/p2.json")"
figures "$tmp/p2.json" "${addr[2]}" | grep -q '"live":true' ||
  fail "phase 2: worker 2 not live: $(cat "$tmp/p2.json")"
kill -0 "${pids[1]}" 2>/dev/null || fail "worker 2 died"
echo "netns_test: phase 2 ok: every sample once per epoch after the cut ($((SECONDS - t0)) s;" \
  "remote: $(grep -o '"redispatched":[0-9]*' "$tmp/p2.json"))" >&2
echo "netns_test: PASS in $((SECONDS - start)) s" >&2
