-- Argo CD health of a herd.dev Agent (argocd-cm key
-- resource.customizations.health.herd.dev_Agent), after prologue.lua: a refused spec or an
-- unresolved reference (a Skill, a Secret, a ConfigMap) is Degraded.
return observed_health("waiting for the operator to observe the Agent",
  { "Accepted", "ResolvedRefs" }, nil)
