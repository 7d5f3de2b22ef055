-- Argo CD health of a Workflow (workflow.rxg456.cn), as kstatus (Flux, kpt) reads it:
--   Progressing  the operator has not written a status for the latest spec yet, or the
--                Succeeded condition is Unknown (pending or running, whatever it waits for)
--   Suspended    Succeeded is Unknown and spec.paused is set
--   Healthy      Succeeded is True (Completed)
--   Degraded     Succeeded is False (Failed)
-- The message is the Succeeded condition's.
local hs = { status = "Progressing", message = "Waiting for the operator to see it" }
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Being deleted"
  return hs
end
if obj.status == nil then
  return hs
end
local generation = obj.metadata and obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed ~= generation then
  hs.message = "Waiting for the operator to see generation " .. generation
  return hs
end
for _, condition in ipairs(obj.status.conditions or {}) do
  if condition.type == "Succeeded" then
    hs.message = condition.message or condition.reason or ""
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.status == "False" then
      hs.status = "Degraded"
    elseif obj.spec ~= nil and obj.spec.paused then
      hs.status = "Suspended"
    end
    return hs
  end
end
return hs
