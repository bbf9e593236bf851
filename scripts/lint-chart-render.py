"""What scripts/lint-chart checks in the chart's rendered manifests (helm template output).

  lint-chart-render.py check SET RENDERED    the objects SET (a charts/herd/ci/ name, or
                                             `default`) must render, and their fields
  lint-chart-render.py server RENDERED OUT   writes to OUT the objects an API server without
                                             the Prometheus Operator's and cert-manager's CRDs
                                             can take, and names the others on stdout

The release is `herd` in namespace `herd-system` (scripts/lint-chart renders it so).
"""

import json
import sys
from pathlib import Path

import yaml

RELEASE_NAMESPACE = "herd-system"
OPERATOR = "herd-operator"
CHART = Path(__file__).resolve().parent.parent / "charts/herd"
RBAC = CHART / "files/rbac"
# The alerts the PrometheusRule must carry, and the dashboard its ConfigMap must hold.
RULES = CHART / "files/prometheus/rules.yaml"
DASHBOARD = CHART / "dashboards/herd.json"
# The ClusterRoles of metrics.secure.
METRICS_RBAC = CHART / "files/metrics"
# Kinds whose CRDs the test API server does not have: left out of the server dry run.
FOREIGN_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "ClusterIssuer"),
    ("cert-manager.io/v1", "Certificate"),
}
# Every flag of operator/src/config.rs that the chart always passes.
ALWAYS_FLAGS = [
    "--lease-name",
    "--lease-namespace",
    "--http-addr",
    "--run-api-addr",
    "--run-api-url",
    "--run-api-port",
    "--run-api-dns-names",
    "--run-api-tls",
    "--concurrency",
    "--max-active",
    "--max-active-per-namespace",
    "--runner-resources",
    "--runner-image",
    "--sandbox-image",
    "--log-format",
]


class Failed(Exception):
    """A check that did not hold."""


def expect(condition, message):
    if not condition:
        raise Failed(message)


def load(path):
    return [doc for doc in yaml.safe_load_all(Path(path).read_text()) if doc]


def find(objects, kind, name=None, namespace=None):
    return [
        o
        for o in objects
        if o["kind"] == kind
        and (name is None or o["metadata"]["name"] == name)
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]


def one(objects, kind, name, namespace=None):
    found = find(objects, kind, name, namespace)
    where = f" in {namespace}" if namespace else ""
    expect(len(found) == 1, f"expected one {kind} {name}{where}, found {len(found)}")
    return found[0]


def none_of(objects, kind):
    expect(not find(objects, kind), f"no {kind} expected, found {len(find(objects, kind))}")


def flags(deployment):
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    expect("command" not in container, "the operator container must have no command")
    parsed = {}
    for arg in container["args"]:
        name, _, value = arg.partition("=")
        expect(name not in parsed, f"flag {name} is given twice")
        parsed[name] = value
    return parsed


def rules_of(file):
    return yaml.safe_load((RBAC / file).read_text())["rules"]


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ClusterIssuer"}


def check_common(objects, account=OPERATOR):
    """What every set renders the same way; `account` is the operator's ServiceAccount."""
    for o in objects:
        expect(o["kind"] in CLUSTER_SCOPED or o["metadata"].get("namespace"),
               f"{o['kind']}/{o['metadata']['name']} names its namespace")
    if account == OPERATOR:
        one(objects, "ServiceAccount", OPERATOR, RELEASE_NAMESPACE)
    else:
        none_of(objects, "ServiceAccount")
    cluster = one(objects, "ClusterRole", f"{OPERATOR}-cluster")
    expect(cluster["rules"] == rules_of("tokenreview-clusterrole.yaml"),
           "herd-operator-cluster must have the rules of tokenreview-clusterrole.yaml")
    binding = one(objects, "ClusterRoleBinding", f"{OPERATOR}-cluster")
    expect(binding["roleRef"]["name"] == f"{OPERATOR}-cluster", "cluster binding roleRef")
    expect(binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": RELEASE_NAMESPACE}], "cluster binding subject")
    release = one(objects, "Role", f"{OPERATOR}-release", RELEASE_NAMESPACE)
    expect(release["rules"] == rules_of("release-role.yaml"),
           "the release namespace's Role has the rules of release-role.yaml")
    release_binding = one(objects, "RoleBinding", f"{OPERATOR}-release", RELEASE_NAMESPACE)
    expect(release_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                          "kind": "Role", "name": f"{OPERATOR}-release"},
           "the release RoleBinding's roleRef")
    expect(release_binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                            "namespace": RELEASE_NAMESPACE}],
           "the release RoleBinding's subject")

    view = one(objects, "ClusterRole", "herd-view")
    edit = one(objects, "ClusterRole", "herd-edit")
    expect(view["metadata"]["labels"].get("rbac.authorization.k8s.io/aggregate-to-view") == "true",
           "herd-view aggregates to view")
    expect(edit["metadata"]["labels"].get("rbac.authorization.k8s.io/aggregate-to-edit") == "true",
           "herd-edit aggregates to edit")
    budget_admin = one(objects, "ClusterRole", "herd-budget-admin")
    expect(budget_admin["metadata"]["labels"].get("rbac.authorization.k8s.io/aggregate-to-admin")
           == "true" and "rbac.authorization.k8s.io/aggregate-to-edit"
           not in budget_admin["metadata"]["labels"],
           "herd-budget-admin aggregates to admin only (editors do not raise their own cap)")
    writes = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
    # Everyone who may view sees Budgets; only admin writes them, as with ResourceQuota.
    for role, verbs, kinds in ((view, {"get", "list", "watch"},
                                {"agents", "skills", "runs", "schedules", "budgets"}),
                               (edit, writes, {"agents", "skills", "runs", "schedules"}),
                               (budget_admin, writes, {"budgets"})):
        resources = {r for rule in role["rules"] for r in rule["resources"]}
        expect(resources == kinds,
               f"{role['metadata']['name']} covers exactly {sorted(kinds)} (never a status): {resources}")
        expect({v for rule in role["rules"] for v in rule["verbs"]} == verbs,
               f"{role['metadata']['name']} verbs")

    deployment = one(objects, "Deployment", OPERATOR, RELEASE_NAMESPACE)
    pod = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    # The run API peer of every Run's NetworkPolicy (operator/src/controller/run.rs).
    expect(labels.get("app.kubernetes.io/name") == "herd"
           and labels.get("app.kubernetes.io/component") == "operator",
           "operator pods are labelled app.kubernetes.io/name=herd, component=operator")
    expect(pod["serviceAccountName"] == account, f"the pod runs as {account}")
    container = pod["containers"][0]
    expect(container["terminationMessagePolicy"] == "FallbackToLogsOnError",
           "the operator's last words reach its Pod's status")
    expect(isinstance(deployment["spec"]["revisionHistoryLimit"], int)
           and isinstance(pod["terminationGracePeriodSeconds"], int),
           "revisionHistoryLimit and terminationGracePeriodSeconds are set")
    args = flags(deployment)
    for flag in ALWAYS_FLAGS:
        expect(flag in args, f"the operator has {flag}")
    expect(args["--lease-namespace"] == RELEASE_NAMESPACE, "the Lease is in the release namespace")
    expect("--leader-elect" not in args, "leader election has no flag")
    env = {e["name"]: e for e in container["env"]}
    expect(env["POD_NAME"].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           == "metadata.name", "POD_NAME from the downward API")
    security = container["securityContext"]
    expect(security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"]
           and security["capabilities"]["drop"] == ["ALL"], "restricted container securityContext")
    pod_security = pod["securityContext"]
    expect(pod_security["runAsNonRoot"] and pod_security["runAsUser"] == 65532
           and pod_security["runAsGroup"] == 65532
           and pod_security["seccompProfile"]["type"] == "RuntimeDefault",
           "restricted pod securityContext")
    expect(container["livenessProbe"]["httpGet"]["path"] == "/healthz", "liveness on /healthz")
    expect(container["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness on /readyz")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    expect(args["--http-addr"] == f"0.0.0.0:{ports['http']}", "--http-addr on the http port")
    expect(args["--run-api-addr"] == f"0.0.0.0:{ports['run-api']}", "--run-api-addr on its port")
    expect(args["--run-api-port"] == str(ports["run-api"]), "--run-api-port is the pod's port")

    service = one(objects, "Service", OPERATOR, RELEASE_NAMESPACE)
    expect(service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"],
           "the Service selects the operator's pods")
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    expect(service_ports["run-api"]["port"] == ports["run-api"], "Service run-api port")
    # /metrics: plain HTTP on the http port, or with metrics.secure HTTPS on a port of its own.
    metrics_port = ports.get("metrics", ports["http"])
    metrics_service_port = "https-metrics" if "metrics" in ports else "http-metrics"
    expect(service_ports[metrics_service_port]["port"] == metrics_port, "Service metrics port")
    names = args["--run-api-dns-names"].split(",")
    expect(f"{OPERATOR}.{RELEASE_NAMESPACE}.svc" in names, "the Service's names are DNS names")

    policy = one(objects, "NetworkPolicy", OPERATOR, RELEASE_NAMESPACE)
    expect(policy["spec"]["policyTypes"] == ["Ingress"], "NetworkPolicy: Ingress only")
    run_api, metrics = policy["spec"]["ingress"]
    expect(run_api["ports"] == [{"port": ports["run-api"], "protocol": "TCP"}], "run API port")
    expect(run_api["from"] == [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [
        {"key": "herd.dev/run", "operator": "Exists"}]}}], "run API from herd.dev/run pods")
    expect(metrics["ports"] == [{"port": metrics_port, "protocol": "TCP"}], "metrics port")
    expect("namespaceSelector" in metrics["from"][0], "metrics from a namespace selector")
    return deployment, args


def check_cluster_wide(objects):
    role = one(objects, "ClusterRole", OPERATOR)
    expect(role["rules"] == rules_of("clusterrole.yaml"),
           "herd-operator has the rules of clusterrole.yaml")
    one(objects, "ClusterRoleBinding", OPERATOR)
    expect(len(find(objects, "Role")) == 1, "no Role but the release namespace's")
    expect(len(find(objects, "RoleBinding")) == 1, "no RoleBinding but the release namespace's")


def check_default(objects):
    deployment, args = check_common(objects)
    check_cluster_wide(objects)
    expect("--watch-namespaces" not in args, "all namespaces by default")
    expect(args["--run-api-url"] == "https://herd-operator.herd-system.svc:8443", "default URL")
    expect(args["--run-api-tls"] == "operator", "the operator issues the certificate")
    expect(args["--max-active"] == "500" and args["--max-active-per-namespace"] == "100"
           and args["--concurrency"] == "16", "the operator's default caps")
    expect(args["--runner-resources"]
           == "requests.cpu=50m,requests.memory=128Mi,limits.memory=1Gi",
           "the operator's default runner resources")
    expect(not any(a.startswith("--default-model") for a in args), "no default model")
    expect(deployment["spec"]["replicas"] == 1, "one replica")
    pod = deployment["spec"]["template"]["spec"]
    expect("affinity" not in pod and "topologySpreadConstraints" not in pod,
           "one replica: no spreading")
    expect("volumes" not in pod and "volumeMounts" not in pod["containers"][0], "no volumes")
    expect(not any(e["name"].startswith(("OTEL_", "HERD_RUNNER_OTLP"))
                   for e in pod["containers"][0]["env"]), "no traces by default")
    expect(deployment["spec"]["revisionHistoryLimit"] == 10
           and pod["terminationGracePeriodSeconds"] == 30, "the Deployment's defaults")
    expect(pod["containers"][0]["image"] == "ghcr.io/herd-dev/herd-operator:0.1.0",
           "the operator's image at the appVersion")
    for kind in ("PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "Certificate",
                 "Issuer"):
        none_of(objects, kind)
    expect(not find(objects, "ConfigMap"), "no dashboard ConfigMap by default")
    expect("--metrics-secure" not in args, "plain /metrics by default")
    expect(not find(objects, "ClusterRole", "herd-metrics-reader"), "no metrics reader")


def check_namespaced(objects):
    _, args = check_common(objects)
    expect(args["--watch-namespaces"] == "team-a,team-b", "--watch-namespaces")
    expect(not find(objects, "ClusterRole", OPERATOR), "no cluster-wide ClusterRole")
    expect(not find(objects, "ClusterRoleBinding", OPERATOR), "no cluster-wide binding")
    for namespace in ("team-a", "team-b"):
        role = one(objects, "Role", OPERATOR, namespace)
        expect(role["rules"] == rules_of("role.yaml"), f"the Role in {namespace} is role.yaml's")
        binding = one(objects, "RoleBinding", OPERATOR, namespace)
        expect(binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": OPERATOR}, f"the RoleBinding in {namespace}")
    expect(not find(objects, "Role", OPERATOR, RELEASE_NAMESPACE),
           "the release namespace, not watched, has only release-role.yaml's Role")
    expect(len(find(objects, "Role")) == 3, "a Role in each watched namespace and the release's")
    expect(args["--default-model-provider"] == "openai"
           and args["--default-model-name"] == "qwen2.5-7b-instruct"
           and args["--default-model-base-url"] == "http://vllm.models.svc:8000/v1"
           and args["--default-model-secret"] == "model-key"
           and args["--default-model-secret-key"] == "token", "the default model's flags")
    expect(args["--runner-resources"]
           == "requests.cpu=1,requests.memory=256Mi,limits.cpu=2000000,limits.memory=2Gi",
           f"runner resources from YAML numbers: {args['--runner-resources']}")
    expect(args["--runner-image"] == "ghcr.io/herd-dev/herd-runner:0.1.0", "runner image")


def check_certmanager(objects):
    _, args = check_common(objects)
    check_cluster_wide(objects)
    expect(args["--run-api-tls"] == "external", "cert-manager's Secret: --run-api-tls=external")
    expect(args["--run-api-url"] == "https://herd-run-api.example.com:9443", "runApi.url")
    selfsigned = one(objects, "Issuer", "herd-selfsigned", RELEASE_NAMESPACE)
    expect("selfSigned" in selfsigned["spec"], "a self-signed Issuer")
    ca = one(objects, "Certificate", "herd-run-api-ca", RELEASE_NAMESPACE)
    expect(ca["spec"]["isCA"] is True and ca["spec"]["issuerRef"]["name"] == "herd-selfsigned",
           "a CA Certificate from the self-signed Issuer")
    ca_issuer = one(objects, "Issuer", "herd-run-api-ca", RELEASE_NAMESPACE)
    expect(ca_issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"],
           "a CA Issuer on the CA's Secret")
    leaf = one(objects, "Certificate", "herd-run-api", RELEASE_NAMESPACE)
    expect(leaf["spec"]["secretName"] == "herd-run-api-tls", "the leaf writes herd-run-api-tls")
    expect(leaf["spec"]["issuerRef"]["name"] == "herd-run-api-ca", "signed by the CA Issuer")
    dns = leaf["spec"]["dnsNames"]
    for name in args["--run-api-dns-names"].split(",") + ["herd-run-api.example.com"]:
        expect(name in dns, f"the certificate names {name}")


def check_replicas(objects):
    deployment, _ = check_common(objects)
    check_cluster_wide(objects)
    expect(deployment["spec"]["replicas"] == 2, "two replicas")
    pdb = one(objects, "PodDisruptionBudget", OPERATOR, RELEASE_NAMESPACE)
    expect(pdb["spec"]["maxUnavailable"] == 1, "maxUnavailable: 1")
    expect(pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"],
           "the PDB selects the operator's pods")
    template = deployment["spec"]["template"]
    expect(template["spec"]["priorityClassName"] == "system-cluster-critical", "priorityClassName")
    expect(template["metadata"]["annotations"] == {"example.com/team": "agents"}, "podAnnotations")
    expect(pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow",
           "a replica that is not Ready never blocks a drain")
    selector = deployment["spec"]["selector"]["matchLabels"]
    anti = template["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    expect(anti["topologyKey"] == "kubernetes.io/hostname"
           and anti["labelSelector"]["matchLabels"] == selector,
           "by default the replicas prefer different nodes")
    spread = template["spec"]["topologySpreadConstraints"]
    expect(spread == [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                       "whenUnsatisfiable": "ScheduleAnyway",
                       "labelSelector": {"matchLabels": selector}}],
           f"by default the replicas spread across zones: {spread}")


def check_knobs(objects):
    deployment, args = check_common(objects, account="platform-herd")
    check_cluster_wide(objects)
    for o in objects:
        expect(o["metadata"].get("labels", {}).get("example.com/owner") == "platform",
               f"{o['kind']}/{o['metadata']['name']} carries commonLabels")
    expect(deployment["spec"]["template"]["metadata"]["labels"].get("example.com/owner")
           == "platform", "the pods carry commonLabels")
    expect(deployment["spec"]["revisionHistoryLimit"] == 3, "revisionHistoryLimit")
    pod = deployment["spec"]["template"]["spec"]
    expect(pod["terminationGracePeriodSeconds"] == 60, "terminationGracePeriodSeconds")
    container = pod["containers"][0]
    digest = "sha256:" + "a" * 64
    expect(container["image"] == f"registry.example.com/herd-operator@{digest}",
           f"a digest pins the operator's image: {container['image']}")
    expect(args["--runner-image"] == f"registry.example.com/herd-runner@{digest}",
           "a digest pins the runner's image")
    env = {e["name"]: e for e in container["env"]}
    expect(env["HTTPS_PROXY"]["value"] == "http://proxy.example.com:3128"
           and "POD_NAME" in env and "RUST_LOG" in env, "extraEnv after the chart's own")
    expect(pod["volumes"] == [{"name": "ca-bundle", "configMap": {"name": "corporate-ca"}}],
           "extraVolumes")
    expect(container["volumeMounts"] == [{"name": "ca-bundle", "mountPath": "/etc/ssl/corporate",
                                          "readOnly": True}], "extraVolumeMounts")
    expect(pod["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "node-role.example.com/infra",
                                                     "operator": "Exists"}]}]}}},
           "an affinity of one's own replaces the default")
    pdb = one(objects, "PodDisruptionBudget", OPERATOR, RELEASE_NAMESPACE)
    expect(pdb["spec"]["unhealthyPodEvictionPolicy"] == "IfHealthyBudget",
           "podDisruptionBudget.unhealthyPodEvictionPolicy")


def check_servicemonitor(objects):
    _, args = check_common(objects)
    check_cluster_wide(objects)
    expect(args["--log-format"] == "text", "--log-format=text")
    monitor = one(objects, "ServiceMonitor", OPERATOR, RELEASE_NAMESPACE)
    expect(monitor["apiVersion"] == "monitoring.coreos.com/v1", "monitoring.coreos.com/v1")
    expect(monitor["metadata"]["labels"].get("release") == "prometheus", "its labels")
    service = one(objects, "Service", OPERATOR, RELEASE_NAMESPACE)
    expect(all(service["metadata"]["labels"].get(k) == v
               for k, v in monitor["spec"]["selector"]["matchLabels"].items()),
           "the ServiceMonitor selects the Service")
    endpoint = monitor["spec"]["endpoints"][0]
    expect(endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
           and endpoint["path"] == "/metrics", "it scrapes the Service's metrics port")
    # The alerts select job="herd": the job is named after the Service's label.
    expect(service["metadata"]["labels"].get(monitor["spec"]["jobLabel"]) == "herd",
           "the ServiceMonitor's jobLabel makes the job herd")
    rule = one(objects, "PrometheusRule", OPERATOR, RELEASE_NAMESPACE)
    expect(rule["metadata"]["labels"].get("release") == "prometheus", "the PrometheusRule's labels")
    expect(rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"],
           "the PrometheusRule carries files/prometheus/rules.yaml as it is")
    dashboard = one(objects, "ConfigMap", "herd-dashboard", RELEASE_NAMESPACE)
    expect(dashboard["metadata"]["labels"].get("grafana_dashboard") == "1",
           "the dashboard ConfigMap has the sidecar's label")
    expect(dashboard["metadata"]["annotations"] == {"grafana_folder": "Herd"},
           "the dashboard ConfigMap's annotations")
    expect(json.loads(dashboard["data"]["herd.json"]) == json.loads(DASHBOARD.read_text()),
           "the ConfigMap holds dashboards/herd.json")


def check_secure_metrics(objects):
    deployment, args = check_common(objects)
    check_cluster_wide(objects)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    expect("--metrics-secure" in args and args["--metrics-addr"] == f"0.0.0.0:{ports['metrics']}",
           "--metrics-secure on the metrics port")
    auth = one(objects, "ClusterRole", f"{OPERATOR}-metrics-auth")
    expect(auth["rules"] == yaml.safe_load((METRICS_RBAC / "auth-clusterrole.yaml").read_text())
           ["rules"], "the operator's metrics-auth rules are files/metrics/auth-clusterrole.yaml's")
    binding = one(objects, "ClusterRoleBinding", f"{OPERATOR}-metrics-auth")
    expect(binding["subjects"] == [{"kind": "ServiceAccount", "name": OPERATOR,
                                    "namespace": RELEASE_NAMESPACE}], "bound to the operator")
    reader = one(objects, "ClusterRole", "herd-metrics-reader")
    expect(reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
           "herd-metrics-reader may get /metrics")
    monitor = one(objects, "ServiceMonitor", OPERATOR, RELEASE_NAMESPACE)
    endpoint = monitor["spec"]["endpoints"][0]
    expect(endpoint["port"] == "https-metrics" and endpoint["scheme"] == "https"
           and endpoint["bearerTokenFile"].endswith("serviceaccount/token")
           and endpoint["tlsConfig"]["ca"]["secret"] == {"name": "herd-run-api-tls",
                                                         "key": "ca.crt"}
           and endpoint["tlsConfig"]["serverName"] in args["--run-api-dns-names"].split(","),
           "the ServiceMonitor scrapes over HTTPS with its token and the run API's CA")


def check_monitoring_without_crds(objects):
    check_common(objects)
    check_cluster_wide(objects)
    none_of(objects, "ServiceMonitor")
    none_of(objects, "PrometheusRule")


def check_traces(objects):
    deployment, _ = check_common(objects)
    check_cluster_wide(objects)
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    endpoint = "http://otel-collector.observability:4318"
    expect(env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == endpoint, "the operator exports there")
    expect(env["HERD_RUNNER_OTLP_ENDPOINT"]["value"] == endpoint, "Run pods get the endpoint")
    expect(env["OTEL_TRACES_SAMPLER_ARG"]["value"] == "0.5", "the sampling ratio")
    expect(env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"]["secretKeyRef"]
           == {"name": "otlp-auth", "key": "headers"},
           "the export headers come from the Secret, never a plain value")
    expect(env["HERD_RUNNER_OTLP_CIDR"]["value"] == "10.96.0.0/12"
           and env["HERD_RUNNER_OTLP_PORT"]["value"] == "4318",
           "Run NetworkPolicies open the collector's CIDR and port")


CHECKS = {
    "default": check_default,
    "namespaced": check_namespaced,
    "certmanager": check_certmanager,
    "replicas": check_replicas,
    "knobs": check_knobs,
    "traces": check_traces,
    "servicemonitor": check_servicemonitor,
    "monitoring-without-crds": check_monitoring_without_crds,
    "secure-metrics": check_secure_metrics,
}


def server(rendered, out):
    objects = load(rendered)
    kept = [o for o in objects if (o["apiVersion"], o["kind"]) not in FOREIGN_KINDS]
    for o in objects:
        if (o["apiVersion"], o["kind"]) in FOREIGN_KINDS:
            print(f"{o['kind']}/{o['metadata']['name']} ({o['apiVersion']})")
    Path(out).write_text(yaml.safe_dump_all(kept, sort_keys=False))


def main(argv):
    if len(argv) == 4 and argv[1] == "check" and argv[2] in CHECKS:
        try:
            CHECKS[argv[2]](load(argv[3]))
        except (Failed, KeyError, IndexError, TypeError) as error:
            print(f"{argv[2]}: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 4 and argv[1] == "server":
        server(argv[2], argv[3])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
