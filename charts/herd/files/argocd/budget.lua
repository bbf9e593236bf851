-- Argo CD health of a herd.dev Budget (argocd-cm key
-- resource.customizations.health.herd.dev_Budget), after prologue.lua. Ready=False is a
-- window the operator cannot read (an unknown time zone).
return observed_health("waiting for the operator to count the Budget", {},
  function(conditions, ready)
    -- A limit reached is the Budget doing its work, not a fault: new Runs wait (or are
    -- refused) until the window resets.
    local exceeded = find(conditions, "Exceeded")
    if ready ~= nil and ready.status == "True" and exceeded ~= nil and exceeded.status == "True" then
      return { status = "Suspended", message = describe(exceeded) }
    end
    return nil
  end)
