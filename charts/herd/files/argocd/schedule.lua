-- Argo CD health of a herd.dev Schedule (argocd-cm key
-- resource.customizations.health.herd.dev_Schedule), after prologue.lua. `suspend: true` is a
-- choice, not a fault: no Run is created until it is lifted (Suspended). Ready=False carries
-- the message of a Run the API server refused.
return observed_health("waiting for the operator to observe the Schedule", { "Accepted" },
  suspended_when_ready("True", "Suspended"))
