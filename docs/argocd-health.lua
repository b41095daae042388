-- Argo CD health check for tuning.enginewright.io/TuningRun (kstatus conditions).
-- Install it in argocd-cm under:
--   resource.customizations.health.tuning.enginewright.io_TuningRun: |
--     <this file>
-- Healthy: Ready=True for the current generation. Degraded: Stalled=True (the message says which
-- field or check failed) or phase Failed. Progressing: everything else (Pending, probing, stages,
-- confirmation, publishing), with the status's progress in the message.
local hs = {status = "Progressing", message = "Waiting for the operator"}
if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
if obj.status.observedGeneration ~= nil and generation ~= nil and obj.status.observedGeneration < generation then
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end
local ready, stalled = nil, nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then ready = condition end
    if condition.type == "Stalled" then stalled = condition end
  end
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "Stalled") .. ": " .. (stalled.message or "")
  return hs
end
if obj.status.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = (ready and ready.message) or "the run failed"
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  return hs
end
hs.message = (obj.status.phase or "Pending") .. " " .. (obj.status.progress or "")
return hs
