// The CLI state file: owner-only mode, one entry per room, removal, directory defaults.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { join } from "node:path";
import { StateStore, defaultStateDir, type RoomEntry } from "../../src/cli/state";

const entry = (code: string, seat: "a" | "b" = "a"): RoomEntry => ({
  code,
  seat,
  token: `secret-token-${code}`,
  baseUrl: "http://127.0.0.1:1",
  since: "2026-11-25T00:00:00.000Z",
});

describe("StateStore", () => {
  let dir: string;
  beforeEach(() => {
    dir = join(mkdtempSync(join(tmpdir(), "duet-state-")), "nested", "duet");
  });
  afterEach(() => rmSync(join(dir, "..", ".."), { recursive: true, force: true }));

  it("creates the file with mode 0600 in a 0700 directory, even under a permissive umask", () => {
    const previous = process.umask(0o000);
    try {
      new StateStore(dir).put(entry("aaaa-bbbb-cccc"));
    } finally {
      process.umask(previous);
    }
    expect(statSync(join(dir, "rooms.json")).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it("keeps the mode 0600 when it rewrites a file that had been loosened", () => {
    const store = new StateStore(dir);
    store.put(entry("aaaa-bbbb-cccc"));
    chmodSync(store.path, 0o644);
    store.put(entry("dddd-eeee-ffff"));
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
  });

  it("forgets an ended room's token but remembers how it ended, for a day", () => {
    const store = new StateStore(dir);
    store.put(entry("aaaa-bbbb-cccc", "b"));
    store.put(entry("dddd-eeee-ffff"));
    const ended = { reason: "closed" as const, by: "a" as const, at: "2026-11-25T00:00:00.000Z" };
    store.markEnded(store.get("aaaa-bbbb-cccc")!, ended, new Date("2026-11-25T01:00:00.000Z"));
    expect(store.list().map((r) => r.code)).toEqual(["dddd-eeee-ffff"]);
    expect(store.endedRooms()).toEqual([
      { code: "aaaa-bbbb-cccc", seat: "b", baseUrl: "http://127.0.0.1:1", ended, seen: "2026-11-25T01:00:00.000Z" },
    ]);
    expect(readFileSync(store.path, "utf8")).not.toContain("secret-token-aaaa-bbbb-cccc");
    // A day later, marking another room ended drops the old record.
    store.markEnded(store.get("dddd-eeee-ffff")!, undefined, new Date("2026-11-26T01:00:01.000Z"));
    expect(store.endedRooms().map((r) => r.code)).toEqual(["dddd-eeee-ffff"]);
    expect(store.forgetEnded("dddd-eeee-ffff")).toBe(true);
    expect(store.endedRooms()).toEqual([]);
  });

  it("holds one entry per room and removes it", () => {
    const store = new StateStore(dir);
    store.put(entry("aaaa-bbbb-cccc"));
    store.put(entry("dddd-eeee-ffff", "b"));
    store.put({ ...entry("aaaa-bbbb-cccc"), token: "replaced" });
    expect(
      store
        .list()
        .map((r) => r.code)
        .sort(),
    ).toEqual(["aaaa-bbbb-cccc", "dddd-eeee-ffff"]);
    expect(store.get("aaaa-bbbb-cccc")?.token).toBe("replaced");
    expect(store.remove("aaaa-bbbb-cccc")).toBe(true);
    expect(store.remove("aaaa-bbbb-cccc")).toBe(false);
    expect(JSON.parse(readFileSync(store.path, "utf8")).rooms).toEqual({
      "dddd-eeee-ffff": entry("dddd-eeee-ffff", "b"),
    });
  });

  it("reads an absent file as no rooms and leaves no temporary files behind", () => {
    const store = new StateStore(dir);
    expect(store.list()).toEqual([]);
    store.put(entry("aaaa-bbbb-cccc"));
    writeFileSync(join(dir, "unrelated"), "x");
    store.remove("aaaa-bbbb-cccc");
    expect(readdirSync(dir).sort()).toEqual(["rooms.json", "unrelated"]);
  });
});

describe("defaultStateDir", () => {
  it("prefers DUET_STATE_DIR, then XDG_STATE_HOME/duet, then ~/.local/state/duet", () => {
    expect(defaultStateDir({ DUET_STATE_DIR: "/x/y", XDG_STATE_HOME: "/s" })).toBe("/x/y");
    expect(defaultStateDir({ XDG_STATE_HOME: "/s" })).toBe("/s/duet");
    expect(defaultStateDir({})).toBe(join(homedir(), ".local", "state", "duet"));
  });
});
