#!/usr/bin/env bash
# Builds the pinned upstream binaries once into a cache folder outside the clone:
# the control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl), the hollow kubelet of the e2e tests and the demo, the kubelet of the
# install test's real node, and Helm.
#
# The folder is keyed by a hash of this script, hack/go.mod, hack/go.sum, the Go
# sources under hack/ and hack/helm's module files, so a fresh clone or CI reuses
# binaries built before, and a changed pin or build rebuilds. A lock keeps two
# builds from writing the same folder; a binary added to the list below is built
# into an existing folder without rebuilding the others.
# PLACEMENT_WEBHOOK_BIN_CACHE overrides the cache root. Prints the bin folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# name  module-folder  package  (one line per binary; k8s: stamped with the release's version)
packages="
etcd                     .     ./etcd
kube-apiserver           .     k8s.io/kubernetes/cmd/kube-apiserver             k8s
kube-scheduler           .     k8s.io/kubernetes/cmd/kube-scheduler             k8s
kube-controller-manager  .     k8s.io/kubernetes/cmd/kube-controller-manager    k8s
kubectl                  .     k8s.io/kubernetes/cmd/kubectl                    k8s
kubelet                  .     k8s.io/kubernetes/cmd/kubelet                    k8s
hollow-kubelet           .     ./hollow-kubelet                                 k8s
helm                     helm  helm.sh/helm/v3/cmd/helm                         helm
"

root=${PLACEMENT_WEBHOOK_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-webhook/control-plane}
key=$(cd "$here" && { cat build.sh go.mod go.sum helm/go.mod helm/go.sum; find . -name '*.go' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-16)
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
echo ">> building $k8s_version (etcd $(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' go.mod)) into $out" >&2
echo ">> a cold build takes about 20 minutes on two cores (plus module downloads); later runs reuse it" >&2
export CGO_ENABLED=0

# The release's version, as Kubernetes' own build stamps it: the Node's
# kubeletVersion, `kubectl version` and the server version Helm checks a
# chart's kubeVersion against.
k8s_minor=$(echo "$k8s_version" | cut -d. -f2)
k8s_stamp="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1"
k8s_stamp+=" -X k8s.io/component-base/version.gitMinor=$k8s_minor -X k8s.io/component-base/version.gitTreeState=clean"
k8s_stamp+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version -X k8s.io/client-go/pkg/version.gitMajor=1"
k8s_stamp+=" -X k8s.io/client-go/pkg/version.gitMinor=$k8s_minor"
# Helm has a module of its own, so its dependencies never move the control plane's.
# Its version, and the Kubernetes version `helm template` and `helm lint` assume
# (the pinned one), are link-time settings, as in Helm's own Makefile.
helm_version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3; exit}' "$here/helm/go.mod")
helm_stamp="-X helm.sh/helm/v3/internal/version.version=$helm_version"
helm_stamp+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor"
helm_stamp+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor"

while read -r name module pkg stamp; do
  [ -n "$name" ] || continue
  [ -x "$out.partial/$name" ] && continue
  case "${stamp:-}" in
    k8s) flags=$k8s_stamp ;;
    helm) flags=$helm_stamp ;;
    *) flags="" ;;
  esac
  t0=$(date +%s)
  echo ">> go build $name ..." >&2
  (cd "$here/$module" && go build -mod=mod -trimpath -ldflags="-s -w $flags" -o "$out.partial/$name" "$pkg")
  echo ">>    $name built in $(( $(date +%s) - t0 ))s" >&2
done <<< "$packages"
rm -rf "$out"
mv "$out.partial" "$out"
echo ">> built in $(( $(date +%s) - start ))s" >&2
echo "$out"
