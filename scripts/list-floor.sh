#!/usr/bin/env bash
# Floor 3 of BENCHMARKS.md: the three LISTs the daemon's initial sync reads, fetched by curl in
# protobuf from the watch cache (resourceVersion=0) to /dev/null, RUNS times each; prints each
# kind's fastest and median seconds and the sum of the fastest (the floor a sync is compared to).
#   scripts/list-floor.sh SERVER TOKEN [RUNS]
# e.g. against `node-lifecycled-sim serve --nodes 5000 --dir D` (its URL and bearer token are in
# D/kubeconfig). Needs curl; plain HTTP or https with a CA curl already trusts.
set -euo pipefail
server=${1:?usage: list-floor.sh SERVER TOKEN [RUNS]}
token=${2:?usage: list-floor.sh SERVER TOKEN [RUNS]}
runs=${3:-5}
total=0
for path in /api/v1/nodes /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases /api/v1/pods; do
  times=()
  for _ in $(seq "$runs"); do
    times+=("$(curl -sS -f -o /dev/null -H "Authorization: Bearer $token" \
      -H 'Accept: application/vnd.kubernetes.protobuf' -w '%{time_total}' "$server$path?resourceVersion=0")")
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -g)
  fastest=$(head -n 1 <<<"$sorted")
  median=$(sed -n "$(( (runs + 1) / 2 ))p" <<<"$sorted")
  bytes=$(curl -sS -f -o /dev/null -H "Authorization: Bearer $token" \
    -H 'Accept: application/vnd.kubernetes.protobuf' -w '%{size_download}' "$server$path?resourceVersion=0")
  printf '%-62s %10s bytes  fastest %.3f s  median %.3f s\n' "$path" "$bytes" "$fastest" "$median"
  total=$(awk -v a="$total" -v b="$fastest" 'BEGIN { printf "%.3f", a + b }')
done
printf 'sum of the fastest: %s s\n' "$total"
