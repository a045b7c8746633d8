// Parsing what the commands take: flag values and text on stdin.
import { MAX_WAIT_MS } from "@duet/protocol";
import { CliError } from "./exit-codes.js";

/** --wait: whole milliseconds, 0..MAX_WAIT_MS. */
export function waitArgument(value: string): number {
  const wait = Number(value);
  if (!/^[0-9]+$/.test(value) || wait > MAX_WAIT_MS)
    throw new CliError(`--wait must be a whole number of milliseconds from 0 to ${MAX_WAIT_MS}.`);
  return wait;
}

export function positiveInteger(flag: string) {
  return (value: string): number => {
    if (!/^[0-9]+$/.test(value) || Number(value) < 1) throw new CliError(`${flag} must be a whole number above 0.`);
    return Number(value);
  };
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8");
}
