// JSON bodies: parsed as they arrive, one chunk at a time, with their shape bounded
// (json-shape.ts); sized so that any legal text fits whatever escaping the client used, and
// refused (never silently repaired) when they are not valid UTF-8. Our own reader rather than
// express.json(): body-parser hands the whole body to JSON.parse in one turn of the event
// loop, after reading all of it, however many values it holds.
import { type Duplex, finished, type Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { IncomingMessage } from "node:http";
import type { Request, RequestHandler } from "express";
import { MAX_BODY_BYTES } from "@duet/protocol";
import { type ApiError, apiError } from "../errors.js";
import { JsonBodyParser } from "./json-shape.js";

const DECOMPRESSORS: Record<string, () => Duplex> = {
  gzip: createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

const TOO_LARGE = `The body is larger than ${MAX_BODY_BYTES.toLocaleString("en")} bytes.`;
const tooLarge = () => apiError("too_large", TOO_LARGE);
const endedEarly = () => apiError("bad_request", "The body ended early.");

/** A request without a body (no Content-Length, no Transfer-Encoding) leaves req.body undefined. */
const hasBody = (req: Request) =>
  req.headers["transfer-encoding"] !== undefined ||
  (req.headers["content-length"] !== undefined && !Number.isNaN(Number(req.headers["content-length"])));

/**
 * Whether a request declares a body larger than any the relay takes (Content-Length, of
 * whatever encoding: a compressed legal body is smaller than the limit). Such a request is
 * answered at once (refuseDeclaredTooLarge), never read.
 */
export function declaredTooLarge(req: IncomingMessage): boolean {
  const declared = req.headers["content-length"];
  return declared !== undefined && /^[0-9]+$/.test(declared) && Number(declared) > MAX_BODY_BYTES;
}

/**
 * Answers 400 too_large (docs/protocol.md §3.4) before reading a byte of a body declared too
 * large, and closes the connection after the answer: waiting for 99,999,999,999 bytes held
 * the request until its timeout (60 s).
 */
export const refuseDeclaredTooLarge: RequestHandler = (req, res, next) => {
  if (!declaredTooLarge(req)) return next();
  res.set("Connection", "close");
  next(tooLarge());
};

/** The body as JSON (an empty body is `{}`) in req.body, or a catalogue error. */
export const jsonBody: RequestHandler = (req, _res, next) => {
  if (!hasBody(req)) return next();
  readJson(req).then((body) => {
    req.body = body;
    next();
  }, next);
};

function readJson(req: Request): Promise<unknown> {
  return new Promise((resolve, reject) => {
    // Agents often forget the Content-Type: the body is JSON whatever it says, but in UTF-8.
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers["content-type"] ?? "")?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== "utf-8" && charset !== "utf8")
      return refuse(apiError("bad_request", "Send the body as UTF-8 JSON (charset=utf-8)."));
    const encoding = (req.headers["content-encoding"] ?? "identity").trim().toLowerCase();
    let source: Readable = req;
    let declared: number | undefined;
    if (encoding === "identity") {
      declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
      if (declared !== undefined && declared > MAX_BODY_BYTES) return refuse(tooLarge());
    } else {
      const decompressor = DECOMPRESSORS[encoding];
      if (!decompressor)
        return refuse(apiError("bad_request", "Send the body as UTF-8 JSON, uncompressed, gzip, deflate or br."));
      source = req.pipe(decompressor());
    }

    const parser = new JsonBodyParser();
    let received = 0;
    let settled = false;
    const stop = () => {
      settled = true;
      source.off("data", onData).off("end", onEnd).off("error", onError).off("error", onDecodeError);
      req.off("error", onError).off("close", onClose);
      if (source !== req) {
        req.unpipe(source as Duplex);
        source.on("error", () => undefined);
        source.destroy();
      }
    };
    function refuse(error: ApiError): void {
      // Read off the rest of the request first, as body-parser did, so the client sees the
      // answer rather than a reset while it is still sending.
      req.resume();
      finished(req, () => reject(error));
    }
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      const refusal = received > MAX_BODY_BYTES ? tooLarge() : parser.feed(chunk);
      if (refusal) {
        stop();
        refuse(refusal);
      } else if (received > 2 * 65_536) {
        // A large body takes one chunk per turn of the event loop: without this, libuv reads
        // up to 32 chunks of a busy socket in one turn, and two connections posting 13 MB
        // bodies would hold every other request for tens of milliseconds at a time.
        source.pause();
        setImmediate(resume);
      }
    };
    const resume = () => {
      if (!settled) source.resume();
    };
    const onEnd = () => {
      stop();
      if (declared !== undefined && received !== declared) return reject(endedEarly());
      const parsed = parser.end();
      if ("value" in parsed) resolve(parsed.value);
      else reject(parsed);
    };
    // The connection failed mid-body, or the client went away before the body ended.
    const onError = () => {
      if (settled) return;
      stop();
      reject(endedEarly());
    };
    const onClose = () => {
      if (!req.complete) onError();
    };
    // A body that does not decompress (Content-Encoding: gzip over other bytes).
    const onDecodeError = () => {
      if (settled) return;
      stop();
      refuse(apiError("bad_request", "The body could not be decoded: check its Content-Encoding."));
    };
    source
      .on("data", onData)
      .on("end", onEnd)
      .on("error", source === req ? onError : onDecodeError);
    if (source !== req) req.on("error", onError);
    req.on("close", onClose);
  });
}
