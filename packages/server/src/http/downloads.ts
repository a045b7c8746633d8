// What an agent on another machine fetches from the relay it was invited to: the duet CLI as
// one file that needs only Node 20, and the skill that explains it. The server's build copies
// both from packages/client/dist/bundle into dist/public; a relay built without them answers
// a JSON 404 on these paths and serves everything else as usual.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { brotliCompress, constants as zlib, gzip } from "node:zlib";
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
/** The CLI bundle when it carries a base URL taken from the request: no shared cache. */
const PRIVATE_CACHE_CONTROL = "private, max-age=300";

/** What a client may ask for in Accept-Encoding, best first, and how it is made (off the event loop). */
const ENCODINGS = {
  br: (body: Buffer) =>
    promisify(brotliCompress)(body, {
      params: { [zlib.BROTLI_PARAM_QUALITY]: 9, [zlib.BROTLI_PARAM_SIZE_HINT]: body.length },
    }),
  gzip: (body: Buffer) => promisify(gzip)(body, { level: 9 }),
} as const;
type Encoding = keyof typeof ENCODINGS;

/** Encoded bodies kept, by ETag: one per file and base URL (the CLI carries the base URL). */
const ENCODED_KEPT = 16;

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
export function downloadRoutes(
  publicDir: string,
  limiter: RequestHandler,
  baseUrl: ((req: Request) => string) & { fromRequest?: boolean },
): Router {
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
  // Compressed once per body, a few bodies kept: the CLI is 0.37 MB plain, 0.1 MB gzipped.
  const encoded = new Map<string, Promise<Buffer>>();
  const encode = (body: Buffer, etag: string, encoding: Encoding): Promise<Buffer> => {
    const key = `${encoding} ${etag}`;
    let pending = encoded.get(key);
    if (!pending) {
      pending = ENCODINGS[encoding](body);
      pending.catch(() => encoded.delete(key));
      if (encoded.size >= ENCODED_KEPT) encoded.delete(encoded.keys().next().value!);
      encoded.set(key, pending);
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
      let cacheControl = CACHE_CONTROL;
      if (served.around) {
        // Built from the request's Host (no PUBLIC_URL): only the client's own cache may keep it.
        if (baseUrl.fromRequest) cacheControl = PRIVATE_CACHE_CONTROL;
        // A JSON string is a JavaScript string literal: the URL cannot end the literal early.
        const relay = Buffer.from(JSON.stringify(baseUrl(req)));
        body = Buffer.concat([served.around[0], relay, served.around[1]]);
        etag = `"${served.etag.slice(1, 17)}${digest(relay).slice(1, 12)}"`;
      }
      res.vary("Accept-Encoding");
      // gzip or br when the client asks for it (its preference first), each with its own ETag.
      const encoding = req.acceptsEncodings("br", "gzip") as Encoding | false;
      if (encoding) {
        try {
          body = await encode(body, etag, encoding);
        } catch (error) {
          return next(error);
        }
        etag = `${etag.slice(0, -1)}-${encoding}"`;
        res.set("Content-Encoding", encoding);
      }
      res.set({ "Content-Type": type, "Cache-Control": cacheControl, ETag: etag });
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
