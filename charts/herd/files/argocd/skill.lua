-- Argo CD health of a herd.dev Skill (argocd-cm key
-- resource.customizations.health.herd.dev_Skill), after prologue.lua. `enabled: false` is a
-- choice, not a fault: the Skill is valid and rendered, only unused (Suspended).
return observed_health("waiting for the operator to observe the Skill", { "Accepted" },
  suspended_when_ready("False", "Disabled"))
