#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and a matching etcd for one Kubernetes release from
# their Go modules (the Go module proxy only; no Kubernetes source is kept in this repository).
#
#   scripts/build-kube.sh 1.37.2      -> $HOME/.cache/node-lifecycled/k8s-1.37.2/bin/{kube-apiserver,kube-controller-manager,etcd}
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces the staging modules (k8s.io/api,
# client-go, ...) with paths inside its own tree. So a throwaway module of ours requires it at the
# release and replaces each staging module with its published v0.<minor>.<patch> tag, and etcd's
# server module at the version Kubernetes' own go.mod names. Prints the bin folder on its last line.
# Cached: a second run returns at once. PREFIX overrides the folder.
set -euo pipefail
VERSION=${1:?usage: build-kube.sh VERSION (for example 1.37.2)}
VERSION=${VERSION#v}
case "$VERSION" in 1.[0-9]*.[0-9]*) ;; *) echo "build-kube.sh: '$VERSION' is not a Kubernetes release (MAJOR.MINOR.PATCH)" >&2; exit 2;; esac
PREFIX=${PREFIX:-$HOME/.cache/node-lifecycled/k8s-$VERSION}
BIN=$PREFIX/bin
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/etcd" ]; then echo "$BIN"; exit 0; fi
log() { echo "build-kube $VERSION: $*" >&2; }
command -v go >/dev/null || { echo "build-kube.sh: go not found (the machine ships Go; nothing else can build Kubernetes here)" >&2; exit 1; }
MINOR=${VERSION#1.}; STAGING=v0.$MINOR
W=$PREFIX/module; mkdir -p "$W" "$BIN"
cd "$W"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
start=$(date +%s)
log "reading k8s.io/kubernetes v$VERSION's go.mod"
upstream_mod=$(go mod download -json "k8s.io/kubernetes@v$VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
[ -f "$upstream_mod" ] || { echo "build-kube.sh: no go.mod for k8s.io/kubernetes v$VERSION from the module proxy" >&2; exit 1; }
etcd=$(sed -n 's/^\tgo.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\).*/\1/p' "$upstream_mod" | sed -n 1p)
gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream_mod")
{
  echo "module node-lifecycled.test/kube-build"
  echo
  echo "go $gover"
  echo
  grep '^godebug ' "$upstream_mod" || true
  echo
  echo "replace ("
  sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/[a-z0-9-]*$#\t\1 => \1 '"$STAGING"'#p' "$upstream_mod"
  echo ")"
} > go.mod
log "resolving k8s.io/kubernetes v$VERSION and etcd $etcd"
go get "k8s.io/kubernetes@v$VERSION" "go.etcd.io/etcd/server/v3@$etcd" >"$W/get.log" 2>&1 || { tail -n 20 "$W/get.log" >&2; exit 1; }
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=v$VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$MINOR"
for cmd in kube-apiserver kube-controller-manager; do
  log "building $cmd"
  go build -trimpath -ldflags "$ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >"$W/$cmd.log" 2>&1 || { tail -n 30 "$W/$cmd.log" >&2; exit 1; }
  mv "$BIN/$cmd.tmp" "$BIN/$cmd"
done
log "building etcd $etcd"
go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 >"$W/etcd.log" 2>&1 || { tail -n 30 "$W/etcd.log" >&2; exit 1; }
mv "$BIN/etcd.tmp" "$BIN/etcd"
log "built in $(( $(date +%s) - start )) s"
echo "$BIN"
