// Finding the room in what a person or agent pastes: a bare code, a join URL, or a whole
// share block (which names both). The join URL also tells which relay the room lives on.
import { normalizeRoomCode } from "@duet/protocol";

export interface ExtractedRoom {
  /** Canonical room code, e.g. "k7dq-3mxa-9z2f". */
  code: string;
  /** The relay's base URL, when the input held a join URL (`<base>/join/<code>`). */
  baseUrl?: string;
}

// Crockford base32 plus the look-alikes normalizeRoomCode forgives (o, i, l); any case.
const GROUP = "[0-9a-zA-Z]{4}";
const DASHED_CODE = new RegExp(`(?<![0-9a-zA-Z-])${GROUP}-${GROUP}-${GROUP}(?![0-9a-zA-Z-])`, "g");
const URL_PATTERN = /https?:\/\/[^\s<>"'`)\]]+/g;

/**
 * The room named by `input`, or undefined when there is none. A join URL wins over a
 * loose code, because it also names the relay; inside prose only dashed codes count
 * ("k7dq-3mxa-9z2f"), so twelve-letter words are never mistaken for a code.
 */
export function extractRoomCode(input: string): ExtractedRoom | undefined {
  for (const match of input.matchAll(URL_PATTERN)) {
    const fromUrl = roomFromJoinUrl(match[0].replace(/[.,;:!?]+$/, ""));
    if (fromUrl) return fromUrl;
  }
  const whole = normalizeRoomCode(input);
  if (whole) return { code: whole };
  for (const match of input.matchAll(DASHED_CODE)) {
    const code = normalizeRoomCode(match[0]);
    if (code) return { code };
  }
  return undefined;
}

function roomFromJoinUrl(text: string): ExtractedRoom | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const match = /^(.*)\/join\/([^/]+)\/?$/.exec(url.pathname);
  if (!match) return undefined;
  const code = normalizeRoomCode(decodeURIComponent(match[2]!));
  if (!code) return undefined;
  return { code, baseUrl: `${url.origin}${match[1]}` };
}
