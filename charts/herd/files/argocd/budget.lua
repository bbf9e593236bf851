-- Argo CD health of a herd.dev Budget (argocd-cm key
-- resource.customizations.health.herd.dev_Budget). Argo CD runs it in gopher-lua (Lua 5.1)
-- without the string library, so it uses only the base library and the `..` operator.
local function find(conditions, type_)
  for _, condition in ipairs(conditions) do
    if condition.type == type_ then
      return condition
    end
  end
  return nil
end

-- The condition's message, or its reason when the message is empty.
local function describe(condition)
  if condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return condition.reason
end

local status = obj.status
if status == nil or status.observedGeneration == nil then
  return { status = "Progressing", message = "waiting for the operator to count the Budget" }
end
-- Conditions older than the spec say nothing about it: the operator has not caught up yet.
if status.observedGeneration ~= obj.metadata.generation then
  return {
    status = "Progressing",
    message = "waiting for the operator to observe generation " .. obj.metadata.generation,
  }
end
local conditions = status.conditions or {}
local ready = find(conditions, "Ready")
-- A window the operator cannot read (an unknown time zone).
if ready ~= nil and ready.status == "False" then
  return { status = "Degraded", message = describe(ready) }
end
-- A limit reached is the Budget doing its work, not a fault: new Runs wait (or are refused)
-- until the window resets.
local exceeded = find(conditions, "Exceeded")
if ready ~= nil and ready.status == "True" and exceeded ~= nil and exceeded.status == "True" then
  return { status = "Suspended", message = describe(exceeded) }
end
if ready ~= nil and ready.status == "True" then
  return { status = "Healthy", message = describe(ready) }
end
return { status = "Progressing", message = "waiting for the Ready condition" }
