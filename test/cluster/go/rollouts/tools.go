//go:build tools

// Package tools keeps the Argo Rollouts controller command in this module's build list.
package tools

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
