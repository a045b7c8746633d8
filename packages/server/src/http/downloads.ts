// What an agent on another machine fetches from the relay it was invited to: the duet CLI as
// one file that needs only Node 20, and the skill that explains it. The server's build copies
// both from packages/client/dist/bundle into dist/public; a relay built without them answers
// a JSON 404 on these paths and serves everything else as usual.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type Request, Router, type RequestHandler } from "express";
import { apiError } from "../errors.js";
import { shellQuote } from "./shell.js";

export const CLI_PATH = "/v1/cli/duet.cjs";
export const SKILL_PATH = "/v1/skill.md";

/** The download paths, each with the file it serves from the public directory. */
const DOWNLOADS = {
  [CLI_PATH]: { file: "duet.cjs", type: "text/javascript; charset=utf-8", what: "the duet CLI bundle" },
  [SKILL_PATH]: { file: "SKILL.md", type: "text/markdown; charset=utf-8", what: "the duet skill" },
};

/** The one line that tells an agent with only Node how to get the CLI and join `joinUrl` (URLs quoted). */
export const cliFetchCommand = (baseUrl: string, joinUrl: string) =>
  `curl -fsSO ${shellQuote(`${baseUrl}${CLI_PATH}`)} && node duet.cjs join ${shellQuote(joinUrl)}`;

/**
 * The string literal in the CLI bundle that this relay replaces with its base URL as it
 * serves the file (packages/client/src/cli/served.ts): the CLI then defaults to the relay
 * it came from. A bundle without it (built before) is served as it is.
 */
const SERVED_FROM_MARKER = '"__DUET_SERVED_FROM__"';

// A deploy replaces the files and restarts the process, so a client may keep a copy for a
// few minutes and then revalidate it cheaply with its ETag.
const CACHE_CONTROL = "public, max-age=300";

interface LoadedFile {
  body: Buffer;
  etag: string;
  /** The CLI bundle: the bytes before and after SERVED_FROM_MARKER. */
  around?: [Buffer, Buffer];
}

/**
 * Serves DOWNLOADS from `publicDir`, read once on first request and then kept in memory. The
 * CLI bundle carries `baseUrl(req)` (the relay's public URL, as in join_url) as its default relay.
 */
export function downloadRoutes(publicDir: string, limiter: RequestHandler, baseUrl: (req: Request) => string): Router {
  const router = Router();
  const loaded = new Map<string, Promise<LoadedFile>>();
  const load = (file: string): Promise<LoadedFile> => {
    let pending = loaded.get(file);
    if (!pending) {
      pending = readFile(join(publicDir, file)).then((body) => {
        const at = file === DOWNLOADS[CLI_PATH].file ? body.indexOf(SERVED_FROM_MARKER) : -1;
        return {
          body,
          etag: digest(body),
          ...(at >= 0 ? { around: [body.subarray(0, at), body.subarray(at + SERVED_FROM_MARKER.length)] } : {}),
        } as LoadedFile;
      });
      // A failed read is not remembered: the file may appear later (a volume mounted late).
      pending.catch(() => loaded.delete(file));
      loaded.set(file, pending);
    }
    return pending;
  };

  for (const [path, { file, type, what }] of Object.entries(DOWNLOADS)) {
    router.get(path, limiter, async (req, res, next) => {
      let served: LoadedFile;
      try {
        served = await load(file);
      } catch {
        return next(
          apiError(
            "not_found",
            `This relay was built without ${what} (${file}). Install the CLI from the duet repository instead (pnpm install-cli).`,
          ),
        );
      }
      let { body, etag } = served;
      if (served.around) {
        // A JSON string is a JavaScript string literal: the URL cannot end the literal early.
        const relay = Buffer.from(JSON.stringify(baseUrl(req)));
        body = Buffer.concat([served.around[0], relay, served.around[1]]);
        etag = `"${served.etag.slice(1, 17)}${digest(relay).slice(1, 12)}"`;
      }
      res.set({ "Content-Type": type, "Cache-Control": CACHE_CONTROL, ETag: etag });
      // req.fresh compares If-None-Match with the ETag just set; send() then answers 304.
      res.send(body);
    });
  }
  return router;
}

/** A quoted ETag: the first 162 bits of the SHA-256, base64url. */
function digest(bytes: Buffer): string {
  return `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 27)}"`;
}
