#!/usr/bin/env bash
# Builds the pinned upstream control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl), the kubelet of the install test's real node,
# and Helm, once into a cache folder outside the clone.
#
# The folder is keyed by a hash of this script, hack/go.mod, hack/go.sum,
# hack/etcd and hack/helm's module files, so a fresh clone or CI reuses binaries
# built before, and a changed pin or build rebuilds.
# PLACEMENT_WEBHOOK_BIN_CACHE overrides the cache root. Prints the bin folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${PLACEMENT_WEBHOOK_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-webhook/control-plane}
key=$(cat "$here/build.sh" "$here/go.mod" "$here/go.sum" "$here/etcd/main.go" "$here/helm/go.mod" "$here/helm/go.sum" | sha256sum | cut -c1-16)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
out="$root/$k8s_version-$key"
binaries=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet helm)

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
echo ">> a cold build takes about 11 minutes on two cores (plus module downloads); later runs reuse it" >&2
export CGO_ENABLED=0
build() { # MODULE_DIR PACKAGE [LDFLAGS]
  local name
  name=$(basename "$2")
  [ -x "$out.partial/$name" ] && return
  t0=$(date +%s)
  echo ">> go build $name ..." >&2
  (cd "$1" && go build -mod=mod -trimpath -ldflags="-s -w ${3:-}" -o "$out.partial/$name" "$2")
  echo ">>    $name built in $(( $(date +%s) - t0 ))s" >&2
}
build "$here" ./etcd
# The release's version, as Kubernetes' own build stamps it: the Node's
# kubeletVersion, `kubectl version` and the server version Helm checks a
# chart's kubeVersion against.
k8s_minor=$(echo "$k8s_version" | cut -d. -f2)
stamp="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1"
stamp+=" -X k8s.io/component-base/version.gitMinor=$k8s_minor -X k8s.io/component-base/version.gitTreeState=clean"
stamp+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version -X k8s.io/client-go/pkg/version.gitMajor=1"
stamp+=" -X k8s.io/client-go/pkg/version.gitMinor=$k8s_minor"
for pkg in k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
           k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
           k8s.io/kubernetes/cmd/kubelet; do
  build "$here" "$pkg" "$stamp"
done
# Helm has a module of its own, so its dependencies never move the control plane's.
# Its version, and the Kubernetes version `helm template` and `helm lint` assume
# (the pinned one), are link-time settings, as in Helm's own Makefile.
helm_version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3; exit}' "$here/helm/go.mod")
build "$here/helm" helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=$helm_version \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor"
rm -rf "$out"
mv "$out.partial" "$out"
echo ">> control plane ready in $(( $(date +%s) - start ))s" >&2
echo "$out"
