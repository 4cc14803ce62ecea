-- gitops-reloader: offer "reload" on workloads. It never touches the pod template, so the
-- workload stays in sync with git; gitops-reloader replaces the pods.
local actions = {}
actions["reload"] = {
  ["iconClass"] = "fa fa-fw fa-rotate-right",
  ["displayName"] = "Reload (drift-free)",
}
return actions
