// The public documents (the OpenAPI document, the recipe, the landing page) rendered once per
// base URL and compressed once, then served from memory by Accept-Encoding. Rendered per
// request, a pipelined flood of GET /v1/openapi.json from one address answered 575 to 867 a
// second at 85 to 94 % of a core, and another client's recv waited 312 to 512 ms (p50)
// instead of 2 ms. Without PUBLIC_URL the base URL comes from each request's Host: renders
// are kept per base URL in a small map (oldest dropped first), so a client varying its Host
// costs a render per request, which the per-address rate limit bounds like any other call.
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import type { Request, Response } from "express";

interface Rendered {
  type: string;
  identity: Buffer;
  gzip: Buffer;
  br: Buffer;
}

/** Renders kept per document (one per base URL and variant). */
export const DOCUMENT_CACHE_ENTRIES = 32;

// Quality 6: within a few milliseconds for the ~100 KB OpenAPI document, and 85 % smaller.
const BROTLI = { params: { [constants.BROTLI_PARAM_QUALITY]: 6 } };

function render(type: string, text: string): Rendered {
  const identity = Buffer.from(text, "utf8");
  return { type, identity, gzip: gzipSync(identity, { level: 6 }), br: brotliCompressSync(identity, BROTLI) };
}

export class PublicDocument {
  private readonly renders = new Map<string, Rendered>();

  /** `make(key)` renders the text for a key (a base URL, and a variant if any). */
  constructor(
    private readonly type: string,
    private readonly make: (key: string) => string,
  ) {}

  /** The rendered document for a key, from the cache when it is there. */
  get(key: string): Rendered {
    let rendered = this.renders.get(key);
    if (rendered === undefined) {
      rendered = render(this.type, this.make(key));
      if (this.renders.size >= DOCUMENT_CACHE_ENTRIES) this.renders.delete(this.renders.keys().next().value!);
      this.renders.set(key, rendered);
    }
    return rendered;
  }

  /** Sends the document for a key, compressed as the client accepts (Vary: Accept-Encoding). */
  send(req: Request, res: Response, key: string): void {
    sendRendered(req, res, this.get(key));
  }
}

function sendRendered(req: Request, res: Response, rendered: Rendered): void {
  res.vary("Accept-Encoding");
  res.type(rendered.type);
  const encoding = req.acceptsEncodings("br", "gzip", "identity");
  if (encoding === "br" || encoding === "gzip") {
    res.set("Content-Encoding", encoding);
    return void res.send(rendered[encoding]);
  }
  res.send(rendered.identity);
}
