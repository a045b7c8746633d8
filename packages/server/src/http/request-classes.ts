// The relay's HTTP server makes its requests and responses with the app's own prototypes, so
// Express's per-request Object.setPrototypeOf is a no-op. Otherwise V8 gives every request and
// response a hidden class of its own (~2.7 KB of heap, held for a stream's or a waiting recv's
// whole life); this way they share their hidden classes. docs/streams.md, "Figures".
import { IncomingMessage, ServerResponse, type ServerOptions } from "node:http";
import type { Socket } from "node:net";
import type { Express } from "express";

export function serverOptionsFor(app: Express): ServerOptions {
  // V8 keeps the hidden class of objects made with Reflect.construct(Node's constructor,
  // args, newTarget) on newTarget only when newTarget is a subclass constructor (otherwise a
  // fresh map per object: worse than Express's own). So newTarget is a class extending
  // Node's, and its prototype object becomes the app's request (response) prototype: Express
  // 5 reads app.request in app.handle; the new prototype inherits from the old one's parent
  // (Express's request methods) and carries the same `app` property.
  class AppRequestTarget extends IncomingMessage {}
  class AppResponseTarget extends ServerResponse {}
  adopt(app, "request", AppRequestTarget.prototype);
  adopt(app, "response", AppResponseTarget.prototype);
  // The constructors Node calls with `new`: each returns the object made for its target.
  function AppRequest(socket: Socket): IncomingMessage {
    return Reflect.construct(IncomingMessage, [socket], AppRequestTarget);
  }
  function AppResponse(req: IncomingMessage, options?: unknown): ServerResponse {
    return Reflect.construct(ServerResponse, [req, options], AppResponseTarget);
  }
  return {
    IncomingMessage: AppRequest as unknown as typeof IncomingMessage,
    ServerResponse: AppResponse as unknown as typeof ServerResponse,
  };
}

/** Makes target the app's request (or response) prototype, in the place of the one Express made. */
function adopt(app: Express, which: "request" | "response", target: object): void {
  const current = app[which] as object;
  Object.setPrototypeOf(target, Object.getPrototypeOf(current));
  for (const key of Reflect.ownKeys(current))
    Object.defineProperty(target, key, Object.getOwnPropertyDescriptor(current, key)!);
  (app as unknown as Record<string, object>)[which] = target;
}
