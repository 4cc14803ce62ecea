//go:build tools

// Package tools keeps Helm's command in this module's build list.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
