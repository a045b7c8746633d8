// The slow-reader guard's bookkeeping (http/slow-readers.ts), with stand-in requests and
// responses: what an ended answer leaves in its socket is counted once and given back once,
// and an answer that ends while its client is already past the budget is dropped at once.
import { EventEmitter } from "node:events";
import type { Request, Response } from "express";
import { ApiError } from "../../src/errors";
import { slowReaders } from "../../src/http/slow-readers";

const req = { ip: "203.0.113.7" } as Request;
const KEY = "203.0.113.7";

function call(guard: ReturnType<typeof slowReaders>, leftInSocket: number) {
  const socket = { writableLength: leftInSocket, destroy: jest.fn() };
  // As Express's response, it knows its request (res.req): the guard reads the client from it.
  const res = Object.assign(new EventEmitter(), { socket, req }) as unknown as Response & EventEmitter;
  const next = jest.fn();
  guard(req, res, next);
  return { res, socket, next, refused: () => next.mock.calls[0]?.[0] as ApiError | undefined };
}

describe("slowReaders", () => {
  it("counts what an ended answer leaves in its socket until 'finish', and gives it back once", () => {
    const guard = slowReaders({ timeoutMs: 60_000, clientMaxBytes: 1000 });
    const first = call(guard, 800);
    first.res.emit("prefinish");
    expect(guard.unsentBytes(KEY)).toBe(800);
    first.res.emit("finish");
    first.res.emit("close");
    expect(guard.unsentBytes(KEY)).toBe(0);
    expect(first.socket.destroy).not.toHaveBeenCalled();
  });

  it("refuses the client past its budget with 429 rate_limited and Retry-After, and drops an answer ending meanwhile", () => {
    const guard = slowReaders({ timeoutMs: 30_000, clientMaxBytes: 1000 });
    const a = call(guard, 600);
    const b = call(guard, 600);
    const c = call(guard, 600);
    // All three got past the check before any ended; the third ends past the budget.
    a.res.emit("prefinish");
    b.res.emit("prefinish");
    c.res.emit("prefinish");
    expect(guard.unsentBytes(KEY)).toBe(1200);
    expect(c.socket.destroy).toHaveBeenCalled();
    const refused = call(guard, 0).refused();
    expect(refused).toBeInstanceOf(ApiError);
    expect({ code: refused?.code, status: refused?.status, retry: refused?.retryAfterSeconds }).toEqual({
      code: "rate_limited",
      status: 429,
      retry: 30,
    });
    // Another client is not touched.
    const other = { ip: "203.0.113.8" } as Request;
    const next = jest.fn();
    guard(other, Object.assign(new EventEmitter(), { socket: null }) as unknown as Response, next);
    expect(next).toHaveBeenCalledWith();
    a.res.emit("close");
    expect(guard.unsentBytes(KEY)).toBe(600);
    expect(call(guard, 0).next).toHaveBeenCalledWith();
    b.res.emit("finish");
    expect(guard.unsentBytes(KEY)).toBe(0);
  });

  it("counts nothing for an answer the socket has taken whole", () => {
    const guard = slowReaders({ timeoutMs: 60_000, clientMaxBytes: 0 });
    const fast = call(guard, 0);
    fast.res.emit("prefinish");
    expect(guard.unsentBytes(KEY)).toBe(0);
    expect(call(guard, 0).next).toHaveBeenCalledWith();
  });
});
