//go:build tools

// Package tools keeps the four Flux controller commands in this module's build list.
package tools

import (
	_ "github.com/fluxcd/helm-controller"
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/notification-controller"
	_ "github.com/fluxcd/source-controller"
)
