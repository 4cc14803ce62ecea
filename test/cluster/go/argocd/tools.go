//go:build tools

// Package tools keeps Argo CD's multi-call command in this module's build list.
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
