//go:build tools

// Package helm pins the Helm command that renders and installs the chart in
// deploy/helm. It is a module of its own so that Helm's dependencies never move
// the control plane's (hack/go.mod); hack/build.sh builds it beside the others.
package helm

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
