// What an agent on another machine fetches from the relay it was invited to: the duet CLI as
// one file that needs only Node 20, and the skill that explains it. The server's build copies
// both from packages/client/dist/bundle into dist/public; a relay built without them answers
// a JSON 404 on these paths and serves everything else as usual.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Router, type RequestHandler } from "express";
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

// A deploy replaces the files and restarts the process, so a client may keep a copy for a
// few minutes and then revalidate it cheaply with its ETag.
const CACHE_CONTROL = "public, max-age=300";

interface LoadedFile {
  body: Buffer;
  etag: string;
}

/** Serves DOWNLOADS from `publicDir`, read once on first request and then kept in memory. */
export function downloadRoutes(publicDir: string, limiter: RequestHandler): Router {
  const router = Router();
  const loaded = new Map<string, Promise<LoadedFile>>();
  const load = (file: string): Promise<LoadedFile> => {
    let pending = loaded.get(file);
    if (!pending) {
      pending = readFile(join(publicDir, file)).then((body) => ({
        body,
        etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`,
      }));
      // A failed read is not remembered: the file may appear later (a volume mounted late).
      pending.catch(() => loaded.delete(file));
      loaded.set(file, pending);
    }
    return pending;
  };

  for (const [path, { file, type, what }] of Object.entries(DOWNLOADS)) {
    router.get(path, limiter, async (_req, res, next) => {
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
      res.set({ "Content-Type": type, "Cache-Control": CACHE_CONTROL, ETag: served.etag });
      // req.fresh compares If-None-Match with the ETag just set; send() then answers 304.
      res.send(served.body);
    });
  }
  return router;
}
