#!/usr/bin/env bash
# Builds the pinned upstream binaries (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, the hollow kubelet) once into a cache folder
# outside the clone.
#
# The folder is keyed by a hash of hack/go.mod, hack/go.sum and the Go sources
# under hack/, so a fresh clone or CI reuses binaries built before, and a changed
# pin rebuilds. A lock keeps two builds from writing the same folder; a binary
# added to the list below is built into an existing folder without rebuilding
# the others. PLACEMENT_WEBHOOK_BIN_CACHE overrides the cache root. Prints the
# bin folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# name  package (one line per binary)
packages="
etcd                     ./etcd
kube-apiserver           k8s.io/kubernetes/cmd/kube-apiserver
kube-scheduler           k8s.io/kubernetes/cmd/kube-scheduler
kube-controller-manager  k8s.io/kubernetes/cmd/kube-controller-manager
kubectl                  k8s.io/kubernetes/cmd/kubectl
hollow-kubelet           ./hollow-kubelet
"

root=${PLACEMENT_WEBHOOK_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-webhook/control-plane}
key=$(cd "$here" && find . -name '*.go' | LC_ALL=C sort | xargs cat go.mod go.sum | sha256sum | cut -c1-16)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
out="$root/$k8s_version-$key"

complete() {
  while read -r name _; do
    [ -z "$name" ] || [ -x "$out/$name" ] || return 1
  done <<< "$packages"
}

if complete; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: Go is needed to build the control plane (apt-get install golang or see go.dev)" >&2; exit 1; }
mkdir -p "$root"
exec 9>"$out.lock"
flock 9  # another build of this key finishes first; then there is nothing left to do
if complete; then
  echo "$out"
  exit 0
fi
mkdir -p "$out.partial"
if [ -d "$out" ]; then  # a binary was added to the list: keep the ones already built
  cp -al "$out"/. "$out.partial"/ 2>/dev/null || cp -a "$out"/. "$out.partial"/
fi
cd "$here"
start=$(date +%s)
echo ">> building the control plane $k8s_version (etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)) into $out" >&2
echo ">> a cold build takes about 10 minutes on two cores (plus module downloads); later runs reuse it" >&2
export CGO_ENABLED=0
while read -r name pkg; do
  [ -n "$name" ] || continue
  [ -x "$out.partial/$name" ] && continue
  t0=$(date +%s)
  echo ">> go build $name ..." >&2
  go build -mod=mod -trimpath -ldflags='-s -w' -o "$out.partial/$name" "$pkg"
  echo ">>    $name built in $(( $(date +%s) - t0 ))s" >&2
done <<< "$packages"
rm -rf "$out"
mv "$out.partial" "$out"
echo ">> control plane ready in $(( $(date +%s) - start ))s" >&2
echo "$out"
