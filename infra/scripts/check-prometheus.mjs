#!/usr/bin/env node
// Checks the Prometheus configurations under infra/prometheus:
//  1. each is valid. Debian builds Prometheus without Kubernetes service discovery, so a
//     job's kubernetes_sd_configs is checked here against the fields Prometheus documents
//     for it; with --promtool, `promtool check config` (Debian's prometheus package)
//     checks the rest of the file, with that block replaced by a static target;
//  2. compose.yml finds the compose relays: the name it asks Docker's DNS for is a network
//     alias every relay service carries, on the relays' METRICS_PORT, and the compose Prometheus
//     mounts that file;
//  3. kubernetes.yml keeps exactly the relay pods: its rules name the Deployment's pod label
//     and container port, in the example overlay's namespace.
// Without --promtool, everything but promtool, which needs nothing installed: what
// `pnpm lint:infra` runs. With --promtool, only promtool's check of each file, which needs
// promtool: what packages/deploy-tests/test/prometheus-config.test.ts runs (`pnpm test`
// installs promtool first, with the other tests' prerequisites).
// Exit status 1 on any failure. Usage: node infra/scripts/check-prometheus.mjs [--promtool]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments, stringify } from "yaml";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const DIR = join(ROOT, "infra/prometheus");
let failures = 0;
const check = (cond, msg) => {
  if (cond) console.log(`ok   ${msg}`);
  else {
    failures++;
    console.error(`FAIL ${msg}`);
  }
};

// https://prometheus.io/docs/prometheus/latest/configuration/configuration/#kubernetes_sd_config
const KUBERNETES_SD_FIELDS = new Set([
  "api_server",
  "role",
  "kubeconfig_file",
  "basic_auth",
  "authorization",
  "oauth2",
  "proxy_url",
  "no_proxy",
  "proxy_from_environment",
  "proxy_connect_header",
  "follow_redirects",
  "enable_http2",
  "tls_config",
  "namespaces",
  "selectors",
  "attach_metadata",
]);
const KUBERNETES_ROLES = new Set(["node", "service", "pod", "endpoints", "endpointslice", "ingress"]);

function kubernetesSdProblems(sd) {
  const problems = [...Object.keys(sd)].filter((k) => !KUBERNETES_SD_FIELDS.has(k)).map((k) => `unknown field ${k}`);
  if (!KUBERNETES_ROLES.has(sd.role))
    problems.push(`role ${sd.role} is not one of ${[...KUBERNETES_ROLES].join(", ")}`);
  const ns = sd.namespaces ?? {};
  for (const k of Object.keys(ns))
    if (k !== "names" && k !== "own_namespace") problems.push(`unknown field namespaces.${k}`);
  if (ns.names !== undefined && !(Array.isArray(ns.names) && ns.names.every((n) => typeof n === "string")))
    problems.push("namespaces.names is not a list of names");
  return problems;
}

const PROMTOOL = process.argv.includes("--promtool");
if (PROMTOOL && spawnSync("promtool", ["--version"], { encoding: "utf8" }).status !== 0) {
  console.error(
    "FAIL promtool not found: it checks the Prometheus configurations; install Debian's prometheus package (node infra/scripts/test-prerequisites.mjs does)",
  );
  process.exit(1);
}

function finish() {
  const what = PROMTOOL ? "pass promtool check config" : "valid";
  console.log(
    failures
      ? `\ncheck-prometheus: ${failures} problem(s)`
      : `\ncheck-prometheus: all Prometheus configurations ${what}`,
  );
  process.exit(failures ? 1 : 0);
}

const configs = {};
for (const name of readdirSync(DIR).filter((f) => /\.ya?ml$/.test(f))) {
  const path = join(DIR, name);
  const config = parse(readFileSync(path, "utf8"));
  configs[name] = config;
  // 1. Any Kubernetes discovery checked here; with --promtool, promtool checks the rest, with
  // that discovery replaced by a static target.
  const forPromtool = structuredClone(config);
  for (const job of forPromtool.scrape_configs ?? []) {
    if (!job.kubernetes_sd_configs) continue;
    if (!PROMTOOL)
      for (const sd of job.kubernetes_sd_configs) {
        const problems = kubernetesSdProblems(sd);
        check(
          problems.length === 0,
          `infra/prometheus/${name}: job ${job.job_name}: kubernetes_sd_configs ${problems.join("; ") || "as documented"}`,
        );
      }
    delete job.kubernetes_sd_configs;
    job.static_configs = [{ targets: ["relay.invalid:8080"] }];
  }
  if (!PROMTOOL) continue;
  const tmp = mkdtempSync(join(tmpdir(), "duet-promtool-"));
  writeFileSync(join(tmp, name), stringify(forPromtool));
  const out = spawnSync("promtool", ["check", "config", join(tmp, name)], { encoding: "utf8" });
  rmSync(tmp, { recursive: true, force: true });
  check(
    out.status === 0,
    `infra/prometheus/${name}: promtool check config${out.status === 0 ? "" : `\n${out.stdout}${out.stderr}`}`,
  );
}

if (PROMTOOL) finish();

// 2. The compose Prometheus finds every compose relay by DNS.
const compose = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true });
// The relays: the services built from the Dockerfile.
const relays = Object.entries(compose.services).filter(([, s]) => s.build);
const composeJob = configs["compose.yml"]?.scrape_configs?.find((j) => j.job_name === "duet");
const dns = composeJob?.dns_sd_configs?.[0];
check(
  relays.length > 0 &&
    dns?.names?.length === 1 &&
    relays.every(([, s]) => s.networks?.default?.aliases?.includes(dns.names[0])),
  `compose.yml asks DNS for "${dns?.names?.[0]}", an alias of every compose relay (${relays.map(([n]) => n).join(", ")})`,
);
// /metrics is served on the metrics listener only (METRICS_PORT, default 9464), never on PORT.
check(
  relays.every(([, s]) => Number(s.environment?.METRICS_PORT ?? 9464) === dns?.port),
  `compose.yml scrapes the relays' METRICS_PORT (${dns?.port})`,
);
const prometheus = compose.services.prometheus;
check(
  (prometheus?.volumes ?? []).some((v) =>
    String(v).startsWith("./infra/prometheus/compose.yml:/etc/prometheus/prometheus.yml"),
  ) && (prometheus?.profiles ?? []).includes("monitoring"),
  "docker-compose.yml: the monitoring profile's Prometheus runs infra/prometheus/compose.yml",
);

// 3. The Kubernetes job keeps the relay pods, on their metrics port, in the example's namespace.
const deployment = parseAllDocuments(readFileSync(join(ROOT, "infra/k8s/base/deployment.yaml"), "utf8"))
  .map((d) => d.toJS())
  .find((o) => o?.kind === "Deployment");
const podLabels = deployment.spec.template.metadata.labels;
const portNames = deployment.spec.template.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.name));
const example = parse(readFileSync(join(ROOT, "infra/k8s/overlays/example/kustomization.yaml"), "utf8"));
const k8sJob = configs["kubernetes.yml"]?.scrape_configs?.find((j) => j.job_name === "duet");
const keeps = Object.fromEntries(
  (k8sJob?.relabel_configs ?? [])
    .filter((r) => r.action === "keep")
    .map((r) => [r.source_labels.join(","), new RegExp(`^(?:${r.regex})$`)]),
);
const labelRule = keeps.__meta_kubernetes_pod_label_app_kubernetes_io_name;
const portRule = keeps.__meta_kubernetes_pod_container_port_name;
check(
  labelRule?.test(podLabels["app.kubernetes.io/name"]) && !labelRule.test("duet-redis"),
  `kubernetes.yml keeps pods labelled app.kubernetes.io/name=${podLabels["app.kubernetes.io/name"]} (and not duet-redis)`,
);
check(
  portRule !== undefined && portNames.filter((n) => portRule.test(n)).join() === "metrics",
  `kubernetes.yml keeps the relay's container port "metrics" only (of ${portNames.join(", ")})`,
);
check(
  k8sJob?.kubernetes_sd_configs?.[0]?.role === "pod" &&
    k8sJob.kubernetes_sd_configs[0].namespaces?.names?.includes(example.namespace),
  `kubernetes.yml discovers pods in the example overlay's namespace (${example.namespace})`,
);

finish();
