-- Argo CD health of a herd.dev Run (argocd-cm key
-- resource.customizations.health.herd.dev_Run), after prologue.lua.
--
-- The Succeeded condition decides, as it does for the Run's phase: Unknown while the Run goes
-- (Queued, PodPending, Running, WaitingForInput), then True or False. No generation check: a
-- finished Run keeps its outcome whatever is written to its spec later.
local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  conditions = obj.status.conditions
end
local succeeded = find(conditions, "Succeeded")
if succeeded == nil then
  return { status = "Progressing", message = "waiting for the operator to admit the Run" }
end
if succeeded.status == "True" then
  return { status = "Healthy", message = describe(succeeded) }
end
if succeeded.status == "False" then
  return { status = "Degraded", message = describe(succeeded) }
end
-- An open question: the Run waits for an answer in spec.responses; the message is the question.
local input = find(conditions, "InputRequired")
if input ~= nil and input.status == "True" then
  return { status = "Suspended", message = describe(input) }
end
if succeeded.reason == "WaitingForInput" then
  return { status = "Suspended", message = describe(succeeded) }
end
return { status = "Progressing", message = describe(succeeded) }
