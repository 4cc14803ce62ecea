#!/usr/bin/env bash
# Regenerates ../notification-controller-v1.9.0.json: runs capture_forwarded_test.go inside a copy of
# notification-controller v1.9.0 from the Go module cache, offline, so the fixture holds the bytes
# and headers the controller's own code forwards.
#
# The module's own go.mod names versions the cache may lack (golang.org/x/text v0.37.0); the build
# list of the four Flux controllers together (test/cluster/go/flux/go.mod, or $FLUX_GO_MOD) selects
# ones it has, so its requirements are applied first. The package's other tests are left out (their
# test-only modules are not cached), and the api module is taken from the cache, not ./api.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
flux_mod=${FLUX_GO_MOD:-$repo/test/cluster/go/flux/go.mod}
src=$(go env GOMODCACHE)/github.com/fluxcd/notification-controller@v1.9.0
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src" "$work/nc"
chmod -R u+w "$work/nc"
cd "$work/nc"
find internal/server -name '*_test.go' -delete
cp "$here/capture_forwarded_test.go" internal/server/zz_capture_forwarded_test.go
go mod edit -dropreplace=github.com/fluxcd/notification-controller/api
if [[ -f $flux_mod ]]; then
  awk '/^require \(/{f=1;next} /^\)/{f=0} f&&NF>=2{print "-require="$1"@"$2} /^require [^(]/{print "-require="$2"@"$3}' \
    "$flux_mod" | grep -v 'fluxcd/\(helm\|kustomize\|notification\|source\)-controller@' | xargs go mod edit
fi
CAPTURE_OUT="$here/../notification-controller-v1.9.0.json" GOFLAGS=-mod=mod GOPROXY=off \
  go test ./internal/server/ -run '^TestCaptureForwarded$' -count=1
