// The behaviour suite's OpenAPI check (support/openapi-check.ts) finds what breaks the
// document: a body that does not match, a status or a media type the operation does not
// declare; and it leaves alone what the document does not describe.
import { openApiViolations } from "../support/openapi-check";

const opened = { code: "k7dq-3mxa-9z2f", seat: "a", token: "t", expires_in: 1800, join_url: "u", share: "s" };

describe("the OpenAPI response check", () => {
  it("passes an answer the document describes", async () => {
    expect(
      await openApiViolations("POST", "/v1/open", 200, "application/json; charset=utf-8", JSON.stringify(opened)),
    ).toEqual([]);
    const error = JSON.stringify({ error: "too_many_rooms", message: "m" });
    expect(await openApiViolations("POST", "/v1/open", 429, "application/json; charset=utf-8", error)).toEqual([]);
  });

  it("finds a body off its schema, a status the operation does not declare, and another media type", async () => {
    const wrongSeat = JSON.stringify({ ...opened, seat: "c" });
    expect(await openApiViolations("POST", "/v1/open", 200, "application/json", wrongSeat)).not.toEqual([]);
    const error = JSON.stringify({ error: "bad_request", message: "m" });
    expect(await openApiViolations("POST", "/v1/open", 418, "application/json", error)).not.toEqual([]);
    expect(
      await openApiViolations(
        "POST",
        "/v1/open",
        404,
        "application/json",
        JSON.stringify({ error: "not_found", message: "m" }),
      ),
    ).not.toEqual([]);
    expect(await openApiViolations("GET", "/v1/stats", 200, "text/plain", "hello")).not.toEqual([]);
    expect(
      await openApiViolations(
        "POST",
        "/v1/open",
        400,
        "application/json",
        JSON.stringify({ error: "nope", message: "m" }),
      ),
    ).not.toEqual([]);
  });

  it("leaves alone what the document does not describe", async () => {
    expect(await openApiViolations("GET", "/healthz", 200, "application/json", '{"ok":true}')).toEqual([]);
    expect(await openApiViolations("GET", "/v1/send", 405, "application/json", "{}")).toEqual([]);
  });
});
