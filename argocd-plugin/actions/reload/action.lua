-- gitops-reloader: request a drift-free reload by stamping the workload's own metadata (never its
-- pod template). gitops-reloader restarts the workload once per distinct value.
local os = require("os")
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["gitops-reloader.io/reload-requested-at"] = os.date("!%Y-%m-%dT%XZ")
return obj
