// A real nginx (Debian's) in front of a relay or a topology, configured as the proxies agents
// get stuck behind and the path self-test exists to find: it buffers every answer
// (proxy_buffering on, the relay's X-Accel-Buffering: no ignored, HTTP/1.0 to the upstream
// as nginx does by default: measured, with HTTP/1.1 nginx passes each chunk on as it comes
// even with buffering on) and cuts a request after `readTimeoutS` seconds of silence from
// the upstream (proxy_read_timeout). nginx binds its own port, so it gets a candidate below
// the ephemeral range, retried when taken; the answer must come through it (its own header)
// before the fixture is handed out. stop() ends it and removes its directory.
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { candidatePort } from "./redis-server.js";
import { which } from "./which.js";

export interface BufferingNginx {
  url: string;
  stop(): Promise<void>;
}

const after = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms).unref());

export async function startBufferingNginx(upstream: string, readTimeoutS = 10): Promise<BufferingNginx> {
  const nginx = which("nginx");
  if (!nginx)
    throw new Error("nginx not found: run `node infra/scripts/test-prerequisites.mjs` (apt-get install nginx)");
  const dir = mkdtempSync(join(tmpdir(), "duet-buffering-nginx-"));
  chmodSync(dir, 0o755); // the workers (an unprivileged user when run as root) write buffered answers below it
  mkdirSync(join(dir, "logs"));
  let stopChild: () => Promise<void> = async () => undefined;
  const stop = async () => {
    await stopChild();
    rmSync(dir, { recursive: true, force: true });
  };
  for (let attempt = 0; attempt < 10; attempt++) {
    const port = candidatePort();
    writeFileSync(
      join(dir, "nginx.conf"),
      `worker_processes 1;
error_log stderr warn;
events { worker_connections 256; }
http {
  client_body_temp_path client_body_temp;
  proxy_temp_path proxy_temp;
  fastcgi_temp_path fastcgi_temp;
  uwsgi_temp_path uwsgi_temp;
  scgi_temp_path scgi_temp;
  access_log off;
  server {
    listen 127.0.0.1:${port};
    add_header X-Duet-Test-Proxy ${port} always;
    location / {
      proxy_pass ${upstream};
      proxy_buffering on;
      proxy_ignore_headers X-Accel-Buffering;
      proxy_read_timeout ${readTimeoutS}s;
    }
  }
}
`,
    );
    const child = spawn(
      nginx,
      [
        "-p",
        `${dir}/`,
        "-c",
        join(dir, "nginx.conf"),
        "-e",
        "stderr",
        "-g",
        `daemon off; pid ${join(dir, "nginx.pid")};`,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<null>((r) => child.once("exit", () => r(null)));
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 50 && child.exitCode === null; i++) {
      const ours = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) })
        .then((r) => r.status === 200 && r.headers.get("x-duet-test-proxy") === String(port))
        .catch(() => false);
      if (ours && child.exitCode === null) {
        stopChild = async () => {
          child.kill("SIGTERM");
          await Promise.race([exited, after(5000, null)]);
          if (child.exitCode === null) child.kill("SIGKILL");
        };
        return { url, stop };
      }
      await Promise.race([exited, after(100, null)]);
    }
    if (child.exitCode === null) child.kill("SIGKILL");
    if (!/Address already in use/.test(stderr)) {
      await stop();
      throw new Error(`the buffering nginx did not start:\n${stderr}`);
    }
  }
  await stop();
  throw new Error("the buffering nginx found no free port in 10 tries");
}
