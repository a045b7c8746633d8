// The scale run's progress lines (src/scale.ts), timed from its start, on stderr; in a quiet
// smoke run they are kept instead, and printed only if the run fails.
import { quiet } from "./scale-options.js";

export const kept: string[] = [];
export const t0 = Date.now();
export const log = (line: string) => {
  const text = `[scale ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}\n`;
  if (quiet) kept.push(text);
  else process.stderr.write(text);
};
