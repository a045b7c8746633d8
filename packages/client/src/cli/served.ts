// The relay this CLI came from, when it was downloaded from one (GET /v1/cli/duet.cjs): the
// relay writes its base URL (its PUBLIC_URL, else the address the request reached it at)
// into the quoted marker below as it serves the bundle, so `duet open` on that machine
// talks to that relay with no DUET_URL. Built any other way (tsc, `pnpm install-cli`) the
// marker stays and means none. The server's downloads.ts replaces exactly this string
// literal, quotes included; scripts/bundle.mjs checks the bundle holds it once.
const SERVED_FROM: string = "__DUET_SERVED_FROM__";

/** The base URL of the relay that served this file, or undefined. */
export const servedBaseUrl: string | undefined = /^https?:\/\//.test(SERVED_FROM) ? SERVED_FROM : undefined;
