#!/usr/bin/env node
// Validates the Kubernetes manifests under infra/k8s without a cluster:
//  1. every kustomization's resources exist, and every manifest in its directory is listed;
//  2. every manifest file validates against the Kubernetes schemas (kubernetes-models 4.5.1:
//     types, enums, required fields) and, as an API server with strict field validation
//     does (kubeconform --strict), rejects every field the API does not know (the models of
//     the official client, @kubernetes/client-node, list each type's fields). The Prometheus
//     Operator's PodMonitor validates against its CRD's schema
//     (@kubernetes-models/prometheus-operator 4.4.4); that schema does not forbid other
//     fields, so a field is unknown when a value of the wrong type passes for it;
//  3. each kustomization renders with `kubectl kustomize` (offline; kubectl is required)
//     and every rendered object validates too; a kustomize Component is rendered as part of
//     overlays/example, the installation it is meant to be added to, and its PodMonitor
//     must select the relay pods' labels and port;
//  4. the relay's deployment rules hold on the rendered objects (probes, grace period,
//     security context, Ingress timeouts and body size, no affinity, API versions).
// Exit status 1 on any failure. Usage: node infra/scripts/validate-k8s.mjs [k8s-dir]
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { parseNginxSize, readConfigVariables, readLimits } from "./lib.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
const K8S = resolve(process.argv[2] ?? join(ROOT, "infra/k8s"));
const rel = (p) => relative(ROOT, p) || ".";

let failures = 0;
const fail = (msg) => {
  failures++;
  console.error(`FAIL ${msg}`);
};
const ok = (msg) => console.log(`ok   ${msg}`);

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

const yamlFiles = walk(K8S).filter((p) => /\.ya?ml$/.test(p));
const isKustomization = (p) => /(^|\/)kustomization\.ya?ml$/.test(p);

function parseYaml(text, where) {
  const objects = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) {
      fail(`${where}: YAML error: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj) objects.push(obj);
  }
  return objects;
}

/** Paths of the fields in value that type (an @kubernetes/client-node model name) does not have. */
async function unknownFields(value, type, path) {
  if (value === null || value === undefined) return [];
  const array = /^Array<(.+)>$/.exec(type);
  if (array)
    return Array.isArray(value)
      ? (await Promise.all(value.map((v, i) => unknownFields(v, array[1], `${path}[${i}]`)))).flat()
      : [];
  if (!/^V\d\w*$/.test(type) || typeof value !== "object") return []; // string, number, IntOrString, maps, any
  let model;
  try {
    model = (await import(`@kubernetes/client-node/dist/gen/models/${type}.js`))[type];
  } catch {
    return [`${path}: no model ${type}`];
  }
  const fields = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  const out = [];
  for (const [key, v] of Object.entries(value)) {
    if (!fields.has(key)) out.push(`${path}.${key}`);
    else out.push(...(await unknownFields(v, fields.get(key), `${path}.${key}`)));
  }
  return out;
}

const modelName = (obj) => {
  const version = obj.apiVersion.split("/").at(-1);
  return `${version[0].toUpperCase()}${version.slice(1)}${obj.kind}`;
};

/** The CRD kinds the manifests use: the Prometheus Operator's, from its models. */
const CRD_MODELS = { "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1" };

/** A value of another type than `value`'s, that a field of `value`'s type must refuse. */
const wrongTypeFor = (value) =>
  Array.isArray(value) ? "not-an-array" : typeof value === "object" && value !== null ? 0.5 : [[0.5]];

/**
 * Paths of the fields of a custom resource its schema does not describe: the CRD schema does
 * not forbid other fields (the API server prunes them), so each field is given a value of the
 * wrong type, and a field for which the model still validates is one it does not know.
 */
function unknownCrdFields(Model, obj) {
  const out = [];
  const visit = (value, path) => {
    if (typeof value !== "object" || value === null) return;
    for (const [key, child] of Array.isArray(value) ? value.entries() : Object.entries(value)) {
      const probe = structuredClone(obj);
      let at = probe;
      for (const step of path) at = at[step];
      at[key] = wrongTypeFor(child);
      let accepted = true;
      try {
        new Model(probe).validate();
      } catch {
        accepted = false;
      }
      if (accepted && !Array.isArray(value)) out.push([...path, key].join("."));
      else visit(child, [...path, key]);
    }
  };
  visit(obj.spec, ["spec"]);
  return out;
}

async function validateObject(obj, where) {
  const id = `${where}: ${obj.apiVersion} ${obj.kind}/${obj.metadata?.name}`;
  if (!obj.apiVersion || !obj.kind) return fail(`${where}: object without apiVersion/kind`);
  if (CRD_MODELS[obj.apiVersion]) {
    let Model;
    try {
      Model = (await import(`${CRD_MODELS[obj.apiVersion]}/${obj.kind}`))[obj.kind];
    } catch {
      return fail(`${id}: unknown kind in ${obj.apiVersion}`);
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      return fail(`${id}: ${e.message}`);
    }
    const unknown = unknownCrdFields(Model, obj);
    if (unknown.length) return fail(`${id}: unknown field(s) ${unknown.join(", ")}`);
    return ok(id);
  }
  let Model;
  try {
    Model = (await import(`kubernetes-models/${obj.apiVersion}/${obj.kind}`))[obj.kind];
  } catch {
    return fail(`${id}: unknown apiVersion/kind (not in kubernetes-models)`);
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    return fail(`${id}: ${e.message}`);
  }
  const unknown = await unknownFields(obj, modelName(obj), obj.kind);
  if (unknown.length) return fail(`${id}: unknown field(s) ${unknown.join(", ")}`);
  ok(id);
}

// 1. Kustomization structure.
const kustomizations = yamlFiles.filter(isKustomization);
if (kustomizations.length === 0) fail(`no kustomization.yaml under ${rel(K8S)}`);
const listed = new Set();
for (const file of kustomizations) {
  const dir = dirname(file);
  const [k] = parseYaml(readFileSync(file, "utf8"), rel(file));
  if (!k) continue;
  for (const entry of [...(k.resources ?? []), ...(k.components ?? [])]) {
    const target = resolve(dir, entry);
    if (!existsSync(target)) fail(`${rel(file)}: resource ${entry} does not exist`);
    else if (
      statSync(target).isDirectory() &&
      !["kustomization.yaml", "kustomization.yml"].some((n) => existsSync(join(target, n)))
    )
      fail(`${rel(file)}: resource ${entry} is a directory without kustomization.yaml`);
    else listed.add(target);
  }
  for (const patch of k.patches ?? [])
    if (patch.path && !existsSync(resolve(dir, patch.path))) fail(`${rel(file)}: patch ${patch.path} does not exist`);
  ok(`${rel(file)}: ${(k.resources ?? []).length} resources exist`);
}
for (const file of yamlFiles) {
  if (!isKustomization(file) && !listed.has(file))
    fail(`${rel(file)} is not listed in any kustomization (dead manifest?)`);
}

// 2. Each manifest file on its own.
for (const file of yamlFiles.filter((f) => !isKustomization(f))) {
  for (const obj of parseYaml(readFileSync(file, "utf8"), rel(file))) await validateObject(obj, rel(file));
}

// 3. Rendered kustomizations. A Component is rendered inside overlays/example: kustomize
// reads only relative paths, so through a kustomization written next to the overlays.
const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
const rendered = new Map(); // dir -> objects
const isComponent = (file) => parseYaml(readFileSync(file, "utf8"), rel(file))[0]?.kind === "Component";
const scratch = [];
if (kubectl.status !== 0) {
  fail(
    "kubectl not found: it renders the kustomizations (`kubectl kustomize`); install it (Debian: kubernetes-client)",
  );
} else {
  for (const file of kustomizations) {
    let dir = dirname(file);
    if (isComponent(file)) {
      // As an installation adds it: its overlay, with the overlay's namespace, plus the component.
      const example = join(K8S, "overlays/example");
      const namespace = parseYaml(readFileSync(join(example, "kustomization.yaml"), "utf8"), rel(example))[0]
        ?.namespace;
      const host = mkdtempSync(join(K8S, "overlays", ".render-"));
      scratch.push(host);
      writeFileSync(
        join(host, "kustomization.yaml"),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ${namespace}\nresources:\n  - ../example\ncomponents:\n  - ${relative(host, dir)}\n`,
      );
      dir = host;
    }
    const out = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8", timeout: 60_000 });
    if (out.status !== 0) {
      fail(`kubectl kustomize ${rel(dir)}: ${out.stderr.trim()}`);
      continue;
    }
    const name = dir === dirname(file) ? rel(dir) : `${rel(join(K8S, "overlays/example"))} + ${rel(dirname(file))}`;
    const objects = parseYaml(out.stdout, `render ${name}`);
    rendered.set(name, objects);
    for (const obj of objects) await validateObject(obj, `render ${name}`);
  }
}
for (const dir of scratch) rmSync(dir, { recursive: true, force: true });

// 4. Rules for the relay, on every rendering (or on the base files without kubectl).
const limits = readLimits(ROOT);
const sets = rendered.size
  ? [...rendered.entries()].map(([name, objects]) => [`render ${name}`, objects])
  : [
      [
        rel(join(K8S, "base")),
        walk(join(K8S, "base"))
          .filter((f) => /\.ya?ml$/.test(f) && !isKustomization(f))
          .flatMap((f) => parseYaml(readFileSync(f, "utf8"), rel(f))),
      ],
    ];

for (const [where, objects] of sets) {
  const find = (kind, name) => objects.find((o) => o.kind === kind && (!name || o.metadata?.name === name));
  const check = (cond, msg) => (cond ? ok(`${where}: ${msg}`) : fail(`${where}: ${msg}`));
  const deploy = find("Deployment", "duet-relay");
  if (!deploy) {
    fail(`${where}: no Deployment duet-relay`);
    continue;
  }
  const pod = deploy.spec.template.spec;
  const relay = pod.containers.find((c) => c.name === "relay") ?? pod.containers[0];
  check(deploy.spec.replicas === 3, "Deployment has 3 replicas");
  check(relay.readinessProbe?.httpGet?.path === "/readyz", "readiness probe on /readyz");
  check(relay.livenessProbe?.httpGet?.path === "/healthz", "liveness probe on /healthz");
  check(
    relay.resources?.requests?.cpu &&
      relay.resources?.requests?.memory &&
      relay.resources?.limits?.cpu &&
      relay.resources?.limits?.memory,
    "resource requests and limits set",
  );
  const sc = relay.securityContext ?? {};
  check((sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot) === true, "runs as non-root");
  check(sc.readOnlyRootFilesystem === true, "read-only root filesystem");
  check(sc.allowPrivilegeEscalation === false, "no privilege escalation");
  check((sc.capabilities?.drop ?? []).includes("ALL"), "drops all capabilities");
  // What the image provides: its port (ENV PORT, EXPOSE) and a root that is read-only
  // except /tmp. The manifests must agree with it.
  const runtimeStage = dockerfile.split(/^FROM /m).at(-1) ?? "";
  const imagePort = Number(/PORT=(\d+)/.exec(runtimeStage)?.[1]);
  const exposed = Number(/^EXPOSE\s+(\d+)/m.exec(runtimeStage)?.[1]);
  const ports = relay.ports ?? [];
  const portOf = (p) => (typeof p === "string" ? ports.find((x) => x.name === p)?.containerPort : p);
  check(
    imagePort === exposed && ports.some((p) => p.containerPort === imagePort),
    `container port ${ports.map((p) => p.containerPort).join(",")} is the image's (PORT=${imagePort}, EXPOSE ${exposed})`,
  );
  for (const probe of ["readinessProbe", "livenessProbe", "startupProbe"]) {
    if (relay[probe])
      check(portOf(relay[probe].httpGet?.port) === imagePort, `${probe} reaches the image's port ${imagePort}`);
  }
  const tmpMount = (relay.volumeMounts ?? []).find((m) => m.mountPath === "/tmp");
  const tmpVolume = (pod.volumes ?? []).find((v) => v.name === tmpMount?.name);
  check(Boolean(tmpVolume?.emptyDir), "writable /tmp (an emptyDir) on the read-only root, as the compose file's tmpfs");

  // Environment as the pod will see it: env plus envFrom ConfigMaps and Secrets of this rendering.
  if (rendered.size) {
    const known = new Set(readConfigVariables(ROOT).names);
    const keys = [...(relay.env ?? []).map((e) => e.name)];
    for (const source of relay.envFrom ?? []) {
      const ref = source.configMapRef ?? source.secretRef;
      const obj = find(source.configMapRef ? "ConfigMap" : "Secret", ref.name);
      // The base leaves the Redis Secret to the installation; an overlay must supply it.
      if (!obj && source.secretRef && !where.includes("/overlays/"))
        console.log(`note ${where}: Secret ${ref.name} is left to the overlay`);
      else if (!obj)
        fail(`${where}: envFrom ${ref.name} is not part of this rendering${ref.optional ? " (optional)" : ""}`);
      else keys.push(...Object.keys({ ...obj.data, ...obj.stringData }).map((k) => (source.prefix ?? "") + k));
    }
    const unknown = keys.filter((k) => !known.has(k) && k !== "NODE_ENV" && k !== "NODE_OPTIONS");
    check(
      unknown.length === 0,
      `relay environment (${keys.length} variables) all read by the server${unknown.length ? `; unknown: ${unknown.join(", ")}` : ""}`,
    );
    check(
      keys.includes("REDIS_URL") !== keys.includes("REDIS_CLUSTER_NODES") || !keys.includes("REDIS_URL"),
      "not both REDIS_URL and REDIS_CLUSTER_NODES",
    );
  }

  const preStop = relay.lifecycle?.preStop;
  const preStopSeconds =
    preStop?.sleep?.seconds ??
    Number(/^sleep$/.test(preStop?.exec?.command?.[0] ?? "") ? preStop.exec.command[1] : NaN);
  check(Number.isFinite(preStopSeconds) && preStopSeconds > 0, `preStop pause (${preStopSeconds} s)`);
  const configMaps = (relay.envFrom ?? [])
    .map((e) => e.configMapRef?.name)
    .filter(Boolean)
    .map((n) => find("ConfigMap", n));
  const envValue = (name) =>
    relay.env?.find((e) => e.name === name)?.value ??
    configMaps.map((c) => c?.data?.[name]).find((v) => v !== undefined);
  const drain = Number(envValue("SHUTDOWN_DRAIN_SECONDS") ?? 10);
  const longPoll = limits.MAX_WAIT_MS / 1000;
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  check(
    grace > preStopSeconds + drain + longPoll,
    `terminationGracePeriodSeconds ${grace} > preStop ${preStopSeconds} + drain ${drain} + long-poll ${longPoll}`,
  );

  const service = find("Service", "duet-relay");
  check(service && (service.spec.sessionAffinity ?? "None") === "None", "Service without session affinity");
  const hpa = find("HorizontalPodAutoscaler", "duet-relay");
  check(hpa?.apiVersion === "autoscaling/v2" && hpa.spec.minReplicas >= 2, "HPA autoscaling/v2, at least 2 replicas");
  const pdb = find("PodDisruptionBudget", "duet-relay");
  check(pdb?.apiVersion === "policy/v1", "PDB policy/v1");

  const ingress = find("Ingress", "duet-relay");
  const ann = ingress?.metadata?.annotations ?? {};
  const read = Number(ann["nginx.ingress.kubernetes.io/proxy-read-timeout"]);
  const send = Number(ann["nginx.ingress.kubernetes.io/proxy-send-timeout"]);
  const body = parseNginxSize(ann["nginx.ingress.kubernetes.io/proxy-body-size"] ?? "1m");
  check(read >= 60 && read > longPoll, `Ingress proxy-read-timeout ${read} s >= 60 and > ${longPoll} s long-poll`);
  check(send >= 60, `Ingress proxy-send-timeout ${send} s >= 60`);
  check(
    body > limits.MAX_BODY_BYTES,
    `Ingress proxy-body-size ${body} bytes > relay body limit ${limits.MAX_BODY_BYTES}`,
  );
  check(!Object.keys(ann).some((k) => /affinity|upstream-hash-by/.test(k)), "Ingress without affinity or hashing");

  // /metrics is served on its own listener: the container port "metrics" is METRICS_PORT, and
  // the Service (what the Ingress routes) never targets it.
  const metricsPort = Number(envValue("METRICS_PORT") ?? 9464);
  check(
    ports.some((p) => p.name === "metrics" && p.containerPort === metricsPort),
    `container port "metrics" is METRICS_PORT (${metricsPort})`,
  );
  check(
    (find("Service", "duet-relay")?.spec?.ports ?? []).every(
      (p) => p.targetPort !== "metrics" && p.targetPort !== metricsPort,
    ),
    "the Service does not route the metrics port",
  );

  // A PodMonitor (the Prometheus Operator's) must find the relay pods on their metrics port.
  for (const monitor of objects.filter((o) => o.kind === "PodMonitor")) {
    const podLabels = deploy.spec.template.metadata.labels ?? {};
    const selects = Object.entries(monitor.spec.selector?.matchLabels ?? {});
    check(
      selects.length > 0 && selects.every(([k, v]) => podLabels[k] === v),
      `PodMonitor ${monitor.metadata.name} selects the relay pods (${selects.map(([k, v]) => `${k}=${v}`).join(",")})`,
    );
    check(
      monitor.spec.podMetricsEndpoints.every(
        (e) => e.port === "metrics" && ports.some((p) => p.name === e.port) && (e.path ?? "/metrics") === "/metrics",
      ),
      `PodMonitor ${monitor.metadata.name} scrapes /metrics on the relay's container port "metrics"`,
    );
    check(
      monitor.metadata.namespace === deploy.metadata.namespace,
      `PodMonitor ${monitor.metadata.name} is in the relay's namespace (${deploy.metadata.namespace})`,
    );
  }

  const policy = find("NetworkPolicy");
  const redisSelector = policy?.spec?.podSelector?.matchLabels?.["app.kubernetes.io/name"];
  const fromRelay = policy?.spec?.ingress?.every(
    (rule) =>
      rule.from?.length &&
      rule.from.every(
        (f) =>
          f.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "duet-relay" && !f.namespaceSelector && !f.ipBlock,
      ),
  );
  check(
    redisSelector === "duet-redis" && policy.spec.policyTypes?.includes("Ingress") && fromRelay,
    "NetworkPolicy: only relay pods reach Redis",
  );
  const redis = find("StatefulSet", "duet-redis") ?? find("Deployment", "duet-redis");
  if (redis)
    check(
      redis.spec.template.metadata.labels["app.kubernetes.io/name"] === redisSelector,
      "the in-cluster Redis is covered by the NetworkPolicy",
    );
}

console.log(failures ? `\nvalidate-k8s: ${failures} problem(s)` : "\nvalidate-k8s: all manifests valid");
process.exit(failures ? 1 : 0);
