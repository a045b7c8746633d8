// Every answer the behaviour suite's client receives is checked against the OpenAPI document
// the relay serves (packages/protocol's buildOpenApiDocument), by Stoplight Prism's response
// validator (@stoplight/prism-http, the validating proxy's own code): the status must be one
// the operation declares, the media type one it declares for that status, and the body must
// match its schema. Paths and methods the document does not describe (the pages, /mcp,
// /healthz, a wrong method's 405) are not checked; neither is a 431, which Node's HTTP parser
// answers before the relay sees the request.
import { getHttpOperationsFromSpec } from "@stoplight/prism-http/dist/utils/operations";
import { validateOutput } from "@stoplight/prism-http/dist/validator";
import { buildOpenApiDocument } from "@duet/protocol";

let operations: ReturnType<typeof getHttpOperationsFromSpec> | undefined;

/** How many answers were checked in this worker, and how many were not described. */
export const openApiChecks = { checked: 0, undescribed: 0 };

/** The document's violations of one answer: empty when it conforms or is not described. */
export async function openApiViolations(
  method: string,
  path: string,
  status: number,
  contentType: string | null,
  text: string,
): Promise<string[]> {
  operations ??= getHttpOperationsFromSpec(buildOpenApiDocument() as never);
  const operation = (await operations).find((op) => op.method === method.toLowerCase() && op.path === path);
  if (!operation || status === 431) {
    openApiChecks.undescribed++;
    return [];
  }
  openApiChecks.checked++;
  let body: unknown = text;
  if (contentType?.includes("json") && text !== "") body = JSON.parse(text);
  const result = validateOutput({
    resource: operation,
    element: { statusCode: status, headers: contentType ? { "content-type": contentType } : {}, body },
  });
  if (result._tag === "Right") return [];
  return result.left.map((d) => `${d.path?.length ? `${d.path.join(".")}: ` : ""}${d.message}`);
}
