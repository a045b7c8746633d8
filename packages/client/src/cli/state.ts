// The CLI's state file: one entry per room this machine holds a seat in, with the seat's
// secret token. Only its owner may read it (0600 in a 0700 directory); it is replaced
// atomically so a crash never leaves half a file, and an entry goes when its room does: its
// token is dropped then, and what the relay said about the end is kept for a day, so that
// `duet close` or `duet status` can still say how the room ended.
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type { E2eState } from "../e2e.js";
import type { RoomEnding } from "@duet/protocol";

export interface RoomEntry {
  code: string;
  seat: "a" | "b";
  token: string;
  /** The relay this room lives on. */
  baseUrl: string;
  /** Only the opener has it. */
  joinUrl?: string;
  /** ISO time the seat was taken. */
  since: string;
  /** The room is end-to-end encrypted (told by open or join), whether or not this seat has the key. */
  encrypted?: boolean;
  /** Encrypted rooms: the room key and this seat's sequence numbers. Secret like the token. */
  e2e?: E2eState;
  /** The id of the last message this seat sent from this state file (`duet wait --read last`). */
  lastSent?: string;
  /**
   * Ids `duet recv` printed and nobody acked yet: the next `duet recv` or `duet send` of this
   * room carries them as its `ack` (no call of its own), and `duet close` acks them first.
   */
  printed?: string[];
}

/** A room this state file held a seat in, after the relay said it was gone. No token. */
export interface EndedEntry {
  code: string;
  seat: "a" | "b";
  baseUrl: string;
  /** How it ended, when the relay said (it says so for a while after the end). */
  ended?: RoomEnding;
  /** ISO time the CLI learned the room was gone. */
  seen: string;
}

/** How long an ended room is remembered. */
const ENDED_KEPT_MS = 24 * 60 * 60 * 1000;

interface StateFile {
  version: 1;
  rooms: Record<string, RoomEntry>;
  ended: Record<string, EndedEntry>;
}

/** $DUET_STATE_DIR, else $XDG_STATE_HOME/duet, else ~/.local/state/duet. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DUET_STATE_DIR) return env.DUET_STATE_DIR;
  if (env.XDG_STATE_HOME) return join(env.XDG_STATE_HOME, "duet");
  return join(homedir(), ".local", "state", "duet");
}

export class StateStore {
  readonly path: string;

  constructor(readonly dir: string) {
    this.path = join(dir, "rooms.json");
  }

  list(): RoomEntry[] {
    return Object.values(this.read().rooms);
  }

  get(code: string): RoomEntry | undefined {
    return this.read().rooms[code];
  }

  put(entry: RoomEntry): void {
    const state = this.read();
    state.rooms[entry.code] = entry;
    this.write(state);
  }

  /**
   * Changes one entry as it is in the file now (not as a command read it when it started):
   * `duet watch` and `duet send` may run at once and each updates only its own fields.
   */
  update(code: string, change: (entry: RoomEntry) => void): void {
    const state = this.read();
    const entry = state.rooms[code];
    if (!entry) return;
    change(entry);
    this.write(state);
  }

  /** Rooms that ended, most recently seen first. */
  endedRooms(): EndedEntry[] {
    return Object.values(this.read().ended).sort((x, y) => y.seen.localeCompare(x.seen));
  }

  /** The room is gone: its token is forgotten, how it ended is remembered for a day. */
  markEnded(entry: RoomEntry, ended?: RoomEnding, now = new Date()): EndedEntry {
    const state = this.read();
    delete state.rooms[entry.code];
    const gone: EndedEntry = {
      code: entry.code,
      seat: entry.seat,
      baseUrl: entry.baseUrl,
      seen: now.toISOString(),
      ...(ended ? { ended } : {}),
    };
    state.ended[entry.code] = gone;
    for (const [code, old] of Object.entries(state.ended)) {
      if (now.getTime() - Date.parse(old.seen) > ENDED_KEPT_MS) delete state.ended[code];
    }
    this.write(state);
    return gone;
  }

  /** Forgets an ended room; true when there was one. */
  forgetEnded(code: string): boolean {
    const state = this.read();
    if (!(code in state.ended)) return false;
    delete state.ended[code];
    this.write(state);
    return true;
  }

  /** Removes the room's entry; true when there was one. */
  remove(code: string): boolean {
    const state = this.read();
    if (!(code in state.rooms)) return false;
    delete state.rooms[code];
    this.write(state);
    return true;
  }

  private read(): StateFile {
    let text: string;
    try {
      text = readFileSync(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { version: 1, rooms: {}, ended: {} };
      throw error;
    }
    const parsed = JSON.parse(text) as Partial<StateFile>;
    return { version: 1, rooms: parsed.rooms ?? {}, ended: parsed.ended ?? {} };
  }

  private write(state: StateFile): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // The temporary file is created 0600 from the start: the token is never readable by others, not even briefly.
    const temporary = `${this.path}.${randomBytes(6).toString("hex")}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600, flag: "wx" });
    chmodSync(temporary, 0o600); // the umask may have narrowed it; never widened, but be exact
    renameSync(temporary, this.path);
  }
}
