#!/usr/bin/env node
// Cross-checks the deployment files against the server and the contract:
//  - every environment variable that docker-compose.yml, the Kubernetes manifests
//    (env, envFrom ConfigMaps, Secrets from secretGenerator) and infra/local/topology.mjs
//    pass to the relay is one the server reads (CONFIG_VARIABLES in
//    packages/server/src/config.ts), apart from Node's own NODE_ENV / NODE_OPTIONS;
//  - at most one of REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS is given, and
//    REDIS_SENTINELS comes with REDIS_SENTINEL_NAME;
//  - nginx.conf suits the contract: body limit above MAX_BODY_BYTES, read/send timeouts
//    above the longest recv wait, round robin without stickiness, keepalive upstreams,
//    X-Forwarded-For/Proto set; the compose upstreams are exactly the compose relays.
// Exit status 1 on any failure. Usage: node infra/scripts/check-infra-settings.mjs
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { parseNginxSize, readConfigVariables, readLimits } from "./lib.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const rel = (p) => relative(ROOT, p);
/** Read by Node itself, not by the relay's configuration. */
const RUNTIME_VARIABLES = new Set(["NODE_ENV", "NODE_OPTIONS"]);

let failures = 0;
const check = (cond, msg) => {
  if (cond) console.log(`ok   ${msg}`);
  else {
    failures++;
    console.error(`FAIL ${msg}`);
  }
};

const { names, from } = readConfigVariables(ROOT);
const known = new Set(names);
console.log(`note server settings from ${from}: ${names.length} variables`);
const limits = readLimits(ROOT);

/** where -> variable names given to the relay there */
const passed = [];

// docker-compose.yml: services built from the Dockerfile (or running its image).
const composePath = join(ROOT, "docker-compose.yml");
const compose = parse(readFileSync(composePath, "utf8"), { merge: true });
const relayServices = Object.entries(compose.services ?? {}).filter(
  ([, s]) => s.build || /duet-relay/.test(s.image ?? ""),
);
check(
  relayServices.length === 3,
  `docker-compose.yml runs 3 relay replicas (${relayServices.map(([n]) => n).join(", ")})`,
);
for (const [name, service] of relayServices) {
  check(!service.env_file, `compose ${name} uses no env_file (its variables could not be checked)`);
  const env = service.environment ?? {};
  const keys = Array.isArray(env) ? env.map((e) => String(e).split("=")[0]) : Object.keys(env);
  passed.push([`docker-compose.yml ${name}`, keys]);
}

// Kubernetes: every manifest file, and generators in kustomizations.
const walk = (dir) =>
  readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? walk(join(dir, n)) : [join(dir, n)]));
const k8sFiles = walk(join(ROOT, "infra/k8s")).filter((p) => /\.ya?ml$/.test(p));
const k8sObjects = k8sFiles.flatMap((file) =>
  parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => ({ file, obj: d.toJS() }))
    .filter((x) => x.obj),
);
const configMaps = new Map(); // name -> [{where, keys}]
const secrets = new Map();
const addTo = (map, name, where, keys) => map.set(name, [...(map.get(name) ?? []), { where, keys }]);
for (const { file, obj } of k8sObjects) {
  if (obj.kind === "ConfigMap") addTo(configMaps, obj.metadata.name, rel(file), Object.keys(obj.data ?? {}));
  if (obj.kind === "Secret")
    addTo(secrets, obj.metadata.name, rel(file), Object.keys({ ...obj.data, ...obj.stringData }));
  if (obj.kind === "Kustomization") {
    const keysOf = (g) => [
      ...(g.literals ?? []).map((l) => l.split("=")[0]),
      ...[...(g.envs ?? []), ...(g.env ? [g.env] : [])].flatMap((envFile) =>
        readFileSync(join(dirname(file), envFile), "utf8")
          .split("\n")
          .map((l) => l.trim())
          .filter((l) => l && !l.startsWith("#"))
          .map((l) => l.split("=")[0]),
      ),
    ];
    for (const g of obj.configMapGenerator ?? [])
      addTo(configMaps, g.name, `${rel(file)} configMapGenerator`, keysOf(g));
    for (const g of obj.secretGenerator ?? []) addTo(secrets, g.name, `${rel(file)} secretGenerator`, keysOf(g));
  }
}
const relayDeployments = k8sObjects.filter(
  ({ obj }) => obj.kind === "Deployment" && obj.metadata?.name === "duet-relay",
);
check(relayDeployments.length > 0, "infra/k8s has the duet-relay Deployment");
for (const { file, obj } of relayDeployments) {
  for (const c of obj.spec.template.spec.containers) {
    passed.push([`${rel(file)} container ${c.name} env`, (c.env ?? []).map((e) => e.name)]);
    for (const source of c.envFrom ?? []) {
      const [map, ref, kind] = source.configMapRef
        ? [configMaps, source.configMapRef, "ConfigMap"]
        : [secrets, source.secretRef, "Secret"];
      if (source.prefix) check(false, `${rel(file)}: envFrom prefix ${source.prefix} is not supported by this check`);
      const found = map.get(ref.name) ?? [];
      check(
        found.length > 0 || ref.optional || kind === "Secret",
        `${rel(file)}: ${kind} ${ref.name} is defined under infra/k8s`,
      );
      for (const { where, keys } of found) passed.push([`${where} (${kind} ${ref.name})`, keys]);
    }
  }
}

// The local harness.
const topologySource = readFileSync(join(ROOT, "infra/local/topology.mjs"), "utf8");
const harnessBlock = /Object\.assign\(env,\s*\{([\s\S]*?)\}\);/.exec(topologySource);
check(Boolean(harnessBlock), "infra/local/topology.mjs: relay environment found");
if (harnessBlock)
  passed.push([
    "infra/local/topology.mjs",
    [...harnessBlock[1].matchAll(/^\s*([A-Z][A-Z0-9_]*)\s*:/gm)].map((m) => m[1]),
  ]);

for (const [where, keys] of passed) {
  const unknown = keys.filter((k) => !known.has(k) && !RUNTIME_VARIABLES.has(k));
  check(
    unknown.length === 0,
    `${where}: ${keys.length} variables${unknown.length ? `; unknown to the server: ${unknown.join(", ")}` : " all known to the server"}`,
  );
  const ways = ["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"].filter((k) => keys.includes(k));
  check(
    ways.length <= 1,
    `${where}: at most one of REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS${ways.length > 1 ? ` (has ${ways.join(", ")})` : ""}`,
  );
  if (keys.includes("REDIS_SENTINELS"))
    check(keys.includes("REDIS_SENTINEL_NAME"), `${where}: REDIS_SENTINELS comes with REDIS_SENTINEL_NAME`);
}

// nginx.conf against the contract.
const nginxPath = join(ROOT, "infra/nginx/nginx.conf");
const nginx = readFileSync(nginxPath, "utf8").replace(/#.*$/gm, "");
const directive = (name) => [...nginx.matchAll(new RegExp(`^\\s*${name}\\s+([^;]+);`, "gm"))].map((m) => m[1].trim());
const seconds = (v) => {
  const m = /^([0-9]+)(ms|s|m)?$/.exec(v ?? "");
  return m ? Number(m[1]) * { ms: 0.001, s: 1, m: 60, undefined: 1 }[m[2]] : NaN;
};
const longPoll = limits.MAX_WAIT_MS / 1000;
const body = parseNginxSize(directive("client_max_body_size")[0]);
check(
  body > limits.MAX_BODY_BYTES,
  `nginx client_max_body_size ${body} bytes > relay body limit ${limits.MAX_BODY_BYTES}`,
);
for (const name of ["proxy_read_timeout", "proxy_send_timeout"]) {
  const values = directive(name).map(seconds);
  check(
    values.length > 0 && values.every((v) => v >= 60 && v > longPoll),
    `nginx ${name} ${directive(name).join(", ")} >= 60 s and > ${longPoll} s long-poll`,
  );
}
const streamLocation = /location\s+=\s+\/v1\/stream\s*\{([^}]*)\}/.exec(nginx)?.[1] ?? "";
check(
  /proxy_buffering\s+off;/.test(streamLocation) &&
    seconds(/proxy_read_timeout\s+([^;]+);/.exec(streamLocation)?.[1]) >= 60,
  "nginx /v1/stream: proxy_buffering off, read timeout >= 60 s (the stream's heartbeat is 20 s)",
);
const streamIngress = k8sObjects.find(
  ({ obj }) =>
    obj.kind === "Ingress" && obj.spec?.rules?.some((r) => r.http?.paths?.some((p) => p.path === "/v1/stream")),
)?.obj;
check(
  streamIngress?.metadata?.annotations?.["nginx.ingress.kubernetes.io/proxy-buffering"] === "off" &&
    Number(streamIngress?.metadata?.annotations?.["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 60,
  "k8s Ingress for /v1/stream: proxy-buffering off, read timeout >= 60 s",
);
check(
  directive("keepalive_timeout")
    .map(seconds)
    .every((v) => v > longPoll),
  "nginx keepalive timeouts exceed the long-poll",
);
check(!/^\s*(ip_hash|hash|sticky|least_conn)\b/m.test(nginx), "nginx upstream is round robin without stickiness");
check(
  /^\s*keepalive\s+[0-9]+;/m.test(nginx) &&
    /proxy_http_version\s+1\.1;/.test(nginx) &&
    /proxy_set_header\s+Connection\s+"";/.test(nginx),
  "nginx keeps connections to the replicas alive",
);
check(
  /proxy_set_header\s+X-Forwarded-For\s/.test(nginx) && /proxy_set_header\s+X-Forwarded-Proto\s/.test(nginx),
  "nginx sets X-Forwarded-For and X-Forwarded-Proto",
);
// The relay exempts a trusted proxy from MAX_CONNECTIONS_PER_IP: the proxy bounds each client.
const relayConnections = Number(
  /MAX_CONNECTIONS_PER_IP:\s*integer\(([0-9_]+)/
    .exec(readFileSync(join(ROOT, "packages/server/src/config.ts"), "utf8"))?.[1]
    ?.replace(/_/g, ""),
);
const connectionLimit = Number(/^\s*limit_conn\s+duet_conn_per_client\s+([0-9]+);/m.exec(nginx)?.[1]);
check(
  /^\s*limit_conn_zone\s+\$binary_remote_addr\s+zone=duet_conn_per_client:/m.test(nginx) &&
    connectionLimit > 0 &&
    connectionLimit <= relayConnections,
  `nginx limit_conn per client address ${connectionLimit} <= relay MAX_CONNECTIONS_PER_IP ${relayConnections}`,
);
for (const { obj } of k8sObjects.filter(({ obj }) => obj.kind === "Ingress")) {
  const annotated = Number(obj.metadata?.annotations?.["nginx.ingress.kubernetes.io/limit-connections"]);
  check(
    annotated > 0 && annotated <= relayConnections,
    `k8s Ingress ${obj.metadata?.name}: limit-connections ${annotated} <= relay MAX_CONNECTIONS_PER_IP`,
  );
}
const upstreamKeepalive = seconds(/upstream\s+duet_relay\s*\{[^}]*keepalive_timeout\s+([^;]+);/.exec(nginx)?.[1]);
const relayKeepalive = Number(relayServices[0]?.[1].environment?.KEEP_ALIVE_TIMEOUT_SECONDS ?? 65);
check(
  upstreamKeepalive < relayKeepalive,
  `nginx upstream keepalive_timeout ${upstreamKeepalive} s < relay KEEP_ALIVE_TIMEOUT_SECONDS ${relayKeepalive} s`,
);
const composeUpstreams = [
  ...readFileSync(join(ROOT, "infra/nginx/compose/upstreams.conf"), "utf8")
    .replace(/#.*$/gm, "")
    .matchAll(/^\s*server\s+([^\s:;]+):([0-9]+)/gm),
];
check(
  JSON.stringify(composeUpstreams.map((m) => m[1]).sort()) === JSON.stringify(relayServices.map(([n]) => n).sort()) &&
    composeUpstreams.every((m) => Number(m[2]) === Number(compose.services[m[1]]?.environment?.PORT ?? 8080)),
  `infra/nginx/compose/upstreams.conf lists exactly the compose relays on their PORT (${composeUpstreams.map((m) => `${m[1]}:${m[2]}`).join(", ")})`,
);
const listen = /^\s*listen\s+(?:[^\s;]+:)?([0-9]+)/m.exec(
  readFileSync(join(ROOT, "infra/nginx/compose/listen.conf"), "utf8"),
)?.[1];
check(
  (compose.services.nginx?.ports ?? []).some((p) => String(p).endsWith(`:${listen}`)),
  `compose publishes nginx's listen port ${listen}`,
);

// Containers must listen on every interface; the compose relays and the k8s ConfigMap say so.
for (const [name, service] of relayServices)
  check(service.environment?.HOST === "0.0.0.0", `compose ${name}: HOST=0.0.0.0`);
const relayConfigMap = k8sObjects.find(
  ({ obj }) => obj.kind === "ConfigMap" && obj.metadata?.name === "duet-relay-config",
)?.obj;
check(relayConfigMap?.data?.HOST === "0.0.0.0", "k8s ConfigMap duet-relay-config: HOST=0.0.0.0");

// Dockerfile: the promises the README and the manifests rely on.
const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
const stages = dockerfile.split(/^FROM /m).slice(1);
const runtime = stages.at(-1) ?? "";
const rootPackage = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const packageManager = rootPackage.packageManager;
check(stages.length >= 2, `Dockerfile is multi-stage (${stages.length} stages)`);
// One runtime: the image's Node is the major `pnpm start`, the tests and the figures run on
// (the root devDependency `node`, docs/runtime.md).
const pinnedNode = rootPackage.devDependencies.node;
const imageNode = dockerfile.match(/^ARG NODE_IMAGE=node:(\d+)-slim$/m)?.[1];
const npmrcNode = readFileSync(join(ROOT, ".npmrc"), "utf8")
  .match(/^node-version=(.+)$/m)?.[1]
  ?.trim();
check(
  npmrcNode === pinnedNode,
  `.npmrc's node-version (engines are checked against it) is the pinned Node (${npmrcNode} vs ${pinnedNode})`,
);
check(
  imageNode === pinnedNode.split(".")[0],
  `Dockerfile's base image is the pinned Node (node:${imageNode}-slim vs devDependency node ${pinnedNode})`,
);
check(
  dockerfile.includes(`pnpm@${packageManager.split("@")[1]}`) && /--frozen-lockfile/.test(dockerfile),
  `Dockerfile builds with ${packageManager} from the lockfile`,
);
check(
  /install\s+--frozen-lockfile\s+--offline\s+(--ignore-scripts\s+)?--prod/.test(dockerfile),
  "Dockerfile ships production dependencies only (pnpm install --prod from the lockfile)",
);
const user = /^USER\s+(\S+)/m.exec(runtime)?.[1];
check(/^[1-9][0-9]*(:[0-9]+)?$/.test(user ?? ""), `runtime stage runs as a numeric non-root user (${user})`);
const runAsUser = relayDeployments[0]?.obj.spec.template.spec.securityContext?.runAsUser;
check(
  runAsUser === undefined || String(runAsUser) === user?.split(":")[0],
  `k8s runAsUser ${runAsUser} matches the image's USER ${user}`,
);
check(/^ENV[\s\S]*?HOST=0\.0\.0\.0/m.test(runtime), "runtime stage sets HOST=0.0.0.0");
const healthcheck = /^HEALTHCHECK.*CMD\s+(\[.*\])\s*$/m.exec(runtime)?.[1] ?? "";
check(
  healthcheck.includes('"node"') && healthcheck.includes("/healthz") && !/curl|wget/.test(healthcheck),
  "HEALTHCHECK hits /healthz with node (no curl or wget)",
);
check(!/pnpm|npm install/.test(runtime.replace(/^#.*$/gm, "")), "runtime stage installs nothing (no pnpm/npm)");
const cmd = JSON.parse(/^CMD\s+(\[.*\])\s*$/m.exec(runtime)?.[1] ?? "[]");
// The process entry is what the server package's start script runs (its "main" is the library, relay.js).
const serverEntry = /^node\s+(\S+)$/.exec(
  JSON.parse(readFileSync(join(ROOT, "packages/server/package.json"), "utf8")).scripts?.start ?? "",
)?.[1];
check(
  cmd[0] === "node" && cmd[1] === `packages/server/${serverEntry}`,
  `CMD runs what the server's start script runs (${cmd.join(" ")} vs ${serverEntry})`,
);

console.log(
  failures ? `\ncheck-infra-settings: ${failures} problem(s)` : "\ncheck-infra-settings: all settings consistent",
);
process.exit(failures ? 1 : 0);
