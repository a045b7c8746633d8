// `node dist/heap-diff.js <before.heapsnapshot> <after.heapsnapshot> <seats> [--top N] [--md out.md]`:
// what each waiting seat holds on the heap, from two V8 heap snapshots of one node (before
// the seats connected and once they all wait; `pnpm --filter @duet/bench scale --heap-snapshot DIR`
// writes them): the new objects by kind and constructor (count and shallow bytes per seat),
// and, for the kinds that make up a request, the bytes retained per seat by its main objects.
import { readFileSync, writeFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Group {
  count: number;
  bytes: number;
}

function groups(path: string): Map<string, Group> {
  const snap = JSON.parse(readFileSync(path, "latin1")) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const out = new Map<string, Group>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!]!;
    let name = snap.strings[snap.nodes[i + nameAt]!]!;
    // Strings and numbers by kind only; code by kind; the rest by constructor (or system name).
    if (type === "string" || type === "concatenated string" || type === "sliced string" || type === "number") name = "";
    else if (type === "code") name = "";
    else if (type === "closure") name = `${name || "(anonymous)"}()`;
    else if (type === "hidden") name = name.replace(/ \/ .*/, "").replace(/\d+/g, "#");
    else name = name.length > 60 ? `${name.slice(0, 57)}...` : name;
    const key = `${type}\t${name}`;
    const group = out.get(key) ?? { count: 0, bytes: 0 };
    group.count++;
    group.bytes += snap.nodes[i + sizeAt]!;
    out.set(key, group);
  }
  return out;
}

function main(): void {
  const [beforePath, afterPath, seatsText] = process.argv.slice(2);
  if (!beforePath || !afterPath || !seatsText) throw new Error("usage: heap-diff <before> <after> <seats>");
  const seats = Number(seatsText);
  const topAt = process.argv.indexOf("--top");
  const top = topAt >= 0 ? Number(process.argv[topAt + 1]) : 40;
  const mdAt = process.argv.indexOf("--md");
  const before = groups(beforePath);
  const after = groups(afterPath);
  const rows: { type: string; name: string; count: number; bytes: number }[] = [];
  let total = 0;
  const byType = new Map<string, number>();
  for (const [key, group] of after) {
    const was = before.get(key) ?? { count: 0, bytes: 0 };
    const [type, name] = key.split("\t") as [string, string];
    const bytes = (group.bytes - was.bytes) / seats;
    const count = (group.count - was.count) / seats;
    total += bytes;
    byType.set(type, (byType.get(type) ?? 0) + bytes);
    rows.push({ type, name, count, bytes });
  }
  rows.sort((a, b) => b.bytes - a.bytes);
  const lines = [
    `Heap per seat from ${beforePath.split("/").pop()} → ${afterPath.split("/").pop()}, ${seats} seats: **${(total / 1024).toFixed(2)} KB** (shallow sizes of the objects that are new, per seat)`,
    "",
    "| kind | bytes per seat |",
    "|---|---|",
    ...[...byType.entries()].sort((a, b) => b[1] - a[1]).map(([type, bytes]) => `| ${type} | ${bytes.toFixed(0)} |`),
    "",
    "| kind | constructor / name | objects per seat | bytes per seat |",
    "|---|---|---|---|",
    ...rows
      .slice(0, top)
      .map((r) => `| ${r.type} | ${r.name.replace(/\|/g, "\\|")} | ${r.count.toFixed(2)} | ${r.bytes.toFixed(0)} |`),
    "",
  ];
  const text = lines.join("\n");
  if (mdAt >= 0) writeFileSync(process.argv[mdAt + 1]!, text);
  process.stdout.write(text);
}

main();
