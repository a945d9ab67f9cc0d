#!/usr/bin/env bash
# Builds the pinned upstream control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl) once into a cache folder outside the clone.
#
# The folder is keyed by a hash of hack/go.mod, hack/go.sum and hack/etcd, so a
# fresh clone or CI reuses binaries built before, and a changed pin rebuilds.
# PLACEMENT_WEBHOOK_BIN_CACHE overrides the cache root. Prints the bin folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${PLACEMENT_WEBHOOK_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-webhook/control-plane}
key=$(cat "$here/go.mod" "$here/go.sum" "$here/etcd/main.go" | sha256sum | cut -c1-16)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
out="$root/$k8s_version-$key"
binaries=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl)

complete() {
  for b in "${binaries[@]}"; do [ -x "$out/$b" ] || return 1; done
}

if complete; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: Go is needed to build the control plane (apt-get install golang or see go.dev)" >&2; exit 1; }
mkdir -p "$out.partial"
cd "$here"
start=$(date +%s)
echo ">> building the control plane $k8s_version (etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)) into $out" >&2
echo ">> a cold build takes about 7 minutes on two cores (plus module downloads); later runs reuse it" >&2
export CGO_ENABLED=0
for pkg in ./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
           k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl; do
  name=$(basename "$pkg")
  [ -x "$out.partial/$name" ] && continue
  t0=$(date +%s)
  echo ">> go build $name ..." >&2
  go build -mod=mod -trimpath -ldflags='-s -w' -o "$out.partial/$name" "$pkg"
  echo ">>    $name built in $(( $(date +%s) - t0 ))s" >&2
done
rm -rf "$out"
mv "$out.partial" "$out"
echo ">> control plane ready in $(( $(date +%s) - start ))s" >&2
echo "$out"
