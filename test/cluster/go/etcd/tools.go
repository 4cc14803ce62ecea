//go:build tools

// Package tools keeps etcd's server command in this module's build list.
package tools

import _ "go.etcd.io/etcd/server/v3"
