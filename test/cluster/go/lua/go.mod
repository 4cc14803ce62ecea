// gopher-lua at the version Argo CD v3.6.1 requires (test/cluster/go/argocd/go.mod), built into the
// small runner in main.go.
module gitops-reloader/test/cluster/lua

go 1.25

require github.com/yuin/gopher-lua v1.1.2
