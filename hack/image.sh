#!/usr/bin/env bash
# Builds container images without Docker: buildah (chroot isolation, vfs storage, so it
# runs in an unprivileged container or a CI machine alike) on a base image made from
# Debian packages by mmdebstrap. Prints the path of an image archive (docker-archive,
# for `ctr images import`, `podman load` or `docker load`).
#
#   hack/image.sh [webhook]   the project's image from the Dockerfile, tagged
#                             localhost/placement-webhook:VERSION
#   hack/image.sh pause       the pod sandbox image, built from the pinned Kubernetes
#                             module's build/pause/linux/pause.c (no registry pulls)
#
# Everything is cached under ~/.cache/placement-webhook/image (PLACEMENT_WEBHOOK_IMAGE_CACHE
# overrides it): the base by a hash of its recipe (this file's base_recipe and the
# host's Debian release), each archive by a hash of what it is built from, so a second
# run with nothing changed prints the same path at once.
# Needs (Debian): buildah mmdebstrap gcc; run as root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${PLACEMENT_WEBHOOK_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placement-webhook/image}
target=${1:-webhook}
mkdir -p "$cache"

buildah() {
  command buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs "$@"
}

need() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "image.sh: $tool is needed (apt-get install buildah mmdebstrap gcc)" >&2
      exit 1
    }
  done
}

say() { echo ">> $*" >&2; }

# The base: the host's Debian release, only what `python3 -m venv` and the webhook need
# (libstdc++ for numpy's compiled core). Docs, man pages and translations are left out;
# apt and perl are not installed (the "essential" variant with merged /usr).
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:?}")
base_recipe=(
  --variant=essential
  --include=python3,python3-venv,libstdc++6
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --aptopt='APT::Install-Recommends "false"'
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
)
base_key=$(printf '%s\n' "$suite" "${base_recipe[@]}" | sha256sum | cut -c1-12)
base_image=localhost/placement-webhook-base:$suite-$base_key

# The host's own package sources (files, not names), so the base comes from the same
# Debian mirror the machine is configured for.
host_sources() {
  local files=()
  [ -s /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] && files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || { echo "image.sh: no apt sources configured on this host" >&2; exit 1; }
  printf '%s\n' "${files[@]}"
}

ensure_base() {
  if buildah inspect --type image "$base_image" >/dev/null 2>&1; then
    return
  fi
  need mmdebstrap
  local t0 rootfs ctr
  t0=$(date +%s)
  rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
  say "making the base image $base_image from Debian $suite packages (mmdebstrap, about a minute)"
  mapfile -t sources < <(host_sources)
  mmdebstrap --quiet "${base_recipe[@]}" "$suite" "$rootfs/rootfs.tar" "${sources[@]}"
  ctr=$(buildah from scratch)
  buildah add --quiet "$ctr" "$rootfs/rootfs.tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd '["python3"]' --label "org.opencontainers.image.base.name=debian:$suite" "$ctr"
  buildah commit --quiet --rm "$ctr" "$base_image" >/dev/null
  rm -rf "$rootfs"
  # Bases of an older recipe are stale now.
  buildah images --format '{{.Name}}:{{.Tag}}' | grep '^localhost/placement-webhook-base:' |
    grep -vxF "$base_image" | xargs -r -n1 buildah rmi >/dev/null 2>&1 || true
  say "   base made in $(( $(date +%s) - t0 ))s"
}

# What the Dockerfile's build context holds (.dockerignore's allow-list), hashed.
context_key() {
  (
    cd "$repo"
    find Dockerfile .dockerignore pyproject.toml README.md webhook certs -type f \
      ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -c1-12
}

build_webhook() {
  need buildah
  local version key archive t0 tag
  version=$(awk -F'"' '/^version = /{print $2; exit}' "$repo/pyproject.toml")
  key=$(printf '%s\n' "$(context_key)" "$base_key" | sha256sum | cut -c1-12)
  archive=$cache/placement-webhook-$version-$key.tar
  tag=localhost/placement-webhook:$version
  if [ -s "$archive" ]; then
    echo "$archive"
    return
  fi
  ensure_base
  t0=$(date +%s)
  say "building $tag from the Dockerfile (buildah, base $base_image)"
  # pip inside the build reaches the package index through this machine's TLS set-up:
  # the host's CA bundle is lent to the build read-only (it is not part of the image).
  local ca=()
  [ -s /etc/ssl/certs/ca-certificates.crt ] &&
    ca=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
  buildah build --quiet --isolation chroot --pull-never "${ca[@]}" \
    --build-arg PYTHON_IMAGE="$base_image" --tag "$tag" --file "$repo/Dockerfile" "$repo" >/dev/null
  # A smoke test: every compiled dependency loads on this base, and the commands start.
  local ctr
  ctr=$(buildah from --pull-never "$tag")
  buildah run --isolation chroot "$ctr" -- python3 -c \
    'import numpy, orjson, cryptography.x509, kubernetes, gunicorn, webhook.cli, certs.incluster' ||
    { buildah rm "$ctr" >/dev/null; echo "image.sh: the image cannot import its own code" >&2; exit 1; }
  buildah run --isolation chroot "$ctr" -- placement-webhook --help >/dev/null
  buildah rm "$ctr" >/dev/null
  buildah push --quiet "$tag" "docker-archive:$archive.partial:$tag" >/dev/null
  mv "$archive.partial" "$archive"
  # Older builds of this version: their archives and untagged images are stale now.
  find "$cache" -maxdepth 1 -name "placement-webhook-$version-*.tar" ! -path "$archive" -delete
  buildah rmi --prune >/dev/null 2>&1 || true
  say "   built in $(( $(date +%s) - t0 ))s: image $(buildah images --format '{{.Size}}' "$tag")," \
    "archive $(du -m "$archive" | cut -f1) MB"
  echo "$archive"
}

build_pause() {
  need buildah gcc go
  local module version source key archive tag ctr work
  version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
  module=$(cd "$here" && go mod download -json "k8s.io/kubernetes@$version" | awk -F'"' '/"Dir"/{print $4}')
  source=$module/build/pause/linux/pause.c
  [ -s "$source" ] || { echo "image.sh: $source not found" >&2; exit 1; }
  # The tag the pinned release builds (build/pause/Makefile), so pods and the runtime
  # ask for the image they would ask for on a real node.
  tag=registry.k8s.io/pause:$(awk '$1 == "TAG" && $2 == "?=" {print $3; exit}' "$module/build/pause/Makefile")
  key=$(printf '%s\n' "$tag" "$(sha256sum < "$source")" "$(gcc --version | head -1)" | sha256sum | cut -c1-12)
  archive=$cache/pause-$key.tar
  if [ -s "$archive" ]; then
    echo "$archive"
    return
  fi
  work=$(mktemp -d "$cache/pause.XXXXXX")
  # The same flags as build/pause/Makefile: a static binary that needs nothing else.
  gcc -Os -Wall -Werror -static -DVERSION="${tag##*:}-placement-webhook" -o "$work/pause" "$source"
  strip "$work/pause"
  ctr=$(buildah from scratch)
  buildah copy --quiet "$ctr" "$work/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
  buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
  buildah push --quiet "$tag" "docker-archive:$archive.partial:$tag" >/dev/null
  mv "$archive.partial" "$archive"
  rm -rf "$work"
  say "pause image $tag built from $source"
  echo "$archive"
}

case "$target" in
  webhook) build_webhook ;;
  pause) build_pause ;;
  *) echo "usage: hack/image.sh [webhook|pause]" >&2; exit 2 ;;
esac
