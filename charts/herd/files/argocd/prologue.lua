-- Herd's Argo CD health checks share this part: each resource's script is this file followed
-- by that resource's own (agent.lua, skill.lua, run.lua, schedule.lua, budget.lua). Argo CD
-- runs them in gopher-lua (Lua 5.1) without the string library, so they use only the base
-- library and the `..` operator.
local function find(conditions, type_)
  for _, condition in ipairs(conditions) do
    if condition.type == type_ then
      return condition
    end
  end
  return nil
end

-- The condition's message, or its reason when the message is empty (Ready=True has none).
local function describe(condition)
  if condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return condition.reason
end

-- The health of a resource the operator observes and marks Ready (Agent, Skill, Schedule,
-- Budget): Progressing with the message `waiting` until the operator has observed it;
-- Degraded when one of the conditions `refusals` names is False; then what `special` makes of
-- the conditions and Ready (nil: nothing special); then Ready: Healthy when True, Degraded
-- when False, otherwise Progressing.
local function observed_health(waiting, refusals, special)
  local status = obj.status
  if status == nil or status.observedGeneration == nil then
    return { status = "Progressing", message = waiting }
  end
  -- Conditions older than the spec say nothing about it: the operator has not caught up yet.
  if status.observedGeneration ~= obj.metadata.generation then
    return {
      status = "Progressing",
      message = "waiting for the operator to observe generation " .. obj.metadata.generation,
    }
  end
  local conditions = status.conditions or {}
  for _, type_ in ipairs(refusals) do
    local condition = find(conditions, type_)
    if condition ~= nil and condition.status == "False" then
      return { status = "Degraded", message = describe(condition) }
    end
  end
  local ready = find(conditions, "Ready")
  if special ~= nil then
    local health = special(conditions, ready)
    if health ~= nil then
      return health
    end
  end
  if ready ~= nil and ready.status == "True" then
    return { status = "Healthy", message = describe(ready) }
  end
  if ready ~= nil and ready.status == "False" then
    return { status = "Degraded", message = describe(ready) }
  end
  return { status = "Progressing", message = "waiting for the Ready condition" }
end

-- A `special` of observed_health: Suspended when Ready has the status `status` and the reason
-- `reason` (a choice such as `enabled: false`, not a fault).
local function suspended_when_ready(status, reason)
  return function(_, ready)
    if ready ~= nil and ready.status == status and ready.reason == reason then
      return { status = "Suspended", message = describe(ready) }
    end
    return nil
  end
end

