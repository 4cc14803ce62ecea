// A Redis-compatible server for Argo CD in the local test environment (main.go). miniredis at the
// version Argo CD v3.6.1's module graph pins (test/cluster/go/argocd/go.mod).
module gitops-reloader/test/cluster/redis

go 1.25

require github.com/alicebob/miniredis/v2 v2.39.0

require github.com/yuin/gopher-lua v1.1.2 // indirect
