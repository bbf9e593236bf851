//! An Agent on the scripted model as `herd-runner run -f` reads it: the Agent and the
//! ConfigMap holding its script. Shared by the runner's test binaries and its benchmarks.

/// The Agent `name` on the scripted model `model`, and the ConfigMap `<name>-script` holding
/// its `script` (YAML from column 0). `spec` is more of the Agent's spec: lines indented two
/// spaces, or nothing.
pub fn scripted_agent(name: &str, model: &str, spec: &str, script: &str) -> String {
    format!(
        "apiVersion: herd.dev/v1alpha1
kind: Agent
metadata: {{name: {name}}}
spec:
  model:
    provider: scripted
    name: {model}
    scriptFrom: {{configMapKeyRef: {{name: {name}-script, key: script.yaml}}}}
{spec}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}-script}}
data:
  script.yaml: |
{script}",
        script = indented(script, "    ")
    )
}

/// Each line of `text` after `indent`, so it nests in a YAML block.
pub fn indented(text: &str, indent: &str) -> String {
    text.lines()
        .map(|line| format!("{indent}{line}\n"))
        .collect()
}
