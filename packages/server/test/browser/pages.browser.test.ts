// The pages people open in a browser (the landing page, a join page, the stats page) rendered by headless
// Chromium at a phone's width and a desktop's: the heading and the commands are visible, the
// text is at least 14 px, nothing is cut off and the page never scrolls sideways.
// Screenshots go to test/browser/screenshots/ (not committed) for a person to look at. And a
// page reached over plain HTTP at a network address keeps its links on http (below).
// Needs Debian's chromium package (CHROMIUM_PATH, default /usr/bin/chromium); without it this
// fails, unless DUET_BROWSER_TESTS=off leaves the whole folder out (see jest.config.cjs).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "node:http";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { createApp } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/logger";
import { MemoryRoomStore } from "../../src/store/memory/memory-store";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const SCREENSHOTS = join(__dirname, "screenshots");
const WIDTHS = [390, 1280];
const MIN_FONT_PX = 14;

let server: Server;
let app: ReturnType<typeof createApp>;
let baseUrl: string;
let context: BrowserContext;
let userDataDir: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not at ${CHROMIUM}: install Debian's package (apt-get install -y chromium), set CHROMIUM_PATH, or run with DUET_BROWSER_TESTS=off to leave the browser check out.`,
    );
  }
  const config = loadConfig({ RATE_LIMIT_REQUESTS: "0", RATE_LIMIT_ROOMS: "0" });
  app = createApp({
    config,
    store: new MemoryRoomStore({ idleMs: 60_000, maxMs: 60_000 }),
    logger: createLogger("silent"),
    processMetrics: false,
  });
  server = app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  userDataDir = mkdtempSync(join(tmpdir(), "duet-chromium-"));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 120_000);

afterAll(async () => {
  await context?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  if (server) await new Promise((resolve) => server.close(resolve));
});

interface Layout {
  heading: string;
  headingVisible: boolean;
  codeBlocksVisible: number;
  documentWidth: number;
  viewportWidth: number;
  /** Elements holding text whose font is smaller than MIN_FONT_PX, as "tag: text". */
  smallText: string[];
  /** Elements whose content is wider than their box, or that reach past the viewport. */
  clipped: string[];
}

async function layoutOf(page: Page): Promise<Layout> {
  return page.evaluate((minFont) => {
    // Runs in the page; typed loosely so the package's types need no DOM library.
    type Element = any;
    const window = globalThis as any;
    const { document } = window;
    const getComputedStyle = (el: Element) => window.getComputedStyle(el);
    const label = (el: Element) => `${el.tagName.toLowerCase()}: ${(el.textContent ?? "").trim().slice(0, 60)}`;
    const texts: Element[] = [...document.body.querySelectorAll("h1, p, li, pre, code, a, strong")];
    const visible = (el: Element) => {
      const rect = el.getBoundingClientRect();
      const style = getComputedStyle(el);
      return rect.width > 0 && rect.height > 0 && style.visibility !== "hidden" && style.display !== "none";
    };
    const h1 = document.querySelector("h1");
    return {
      heading: h1?.textContent ?? "",
      headingVisible: h1 !== null && visible(h1),
      codeBlocksVisible: [...(document.querySelectorAll("pre code") as Element[])].filter(visible).length,
      documentWidth: document.documentElement.scrollWidth,
      viewportWidth: document.documentElement.clientWidth,
      smallText: texts.filter((el) => parseFloat(getComputedStyle(el).fontSize) < minFont).map(label),
      clipped: texts
        .filter((el) => {
          const rect = el.getBoundingClientRect();
          const block = getComputedStyle(el).display !== "inline";
          return (
            rect.right > document.documentElement.clientWidth + 0.5 ||
            rect.left < -0.5 ||
            (block && el.scrollWidth > el.clientWidth + 1)
          );
        })
        .map(label),
    };
  }, MIN_FONT_PX);
}

async function openRoomCode(): Promise<string> {
  const reply = await fetch(`${baseUrl}/v1/open`, {
    method: "POST",
    headers: { "user-agent": "duet/0.1", "content-type": "application/json" },
    body: "{}",
  });
  return ((await reply.json()) as { code: string }).code;
}

describe.each(WIDTHS)("at %i px wide", (width) => {
  const check = async (name: string, path: string, heading: RegExp) => {
    const page = await context.newPage();
    try {
      await page.setViewportSize({ width, height: 900 });
      const response = await page.goto(`${baseUrl}${path}`);
      expect(response?.status()).toBe(200);
      expect(response?.headers()["content-type"]).toMatch(/^text\/html/);
      await page.screenshot({ path: join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
      const layout = await layoutOf(page);
      expect(layout.heading).toMatch(heading);
      expect(layout.headingVisible).toBe(true);
      expect(layout.codeBlocksVisible).toBeGreaterThanOrEqual(1);
      expect(layout.smallText).toEqual([]);
      expect(layout.clipped).toEqual([]);
      expect(layout.documentWidth).toBeLessThanOrEqual(layout.viewportWidth);
    } finally {
      await page.close();
    }
  };

  it("the landing page is readable", () => check("landing", "/", /^duet relay$/));

  it("the stats page is readable", () => check("stats", "/v1/stats", /^duet relay stats$/));

  it("a join page is readable", async () => {
    const code = await openRoomCode();
    await check("join", `/join/${code}`, new RegExp(`^Join duet room ${code}$`));
  });
});

// A relay reached over plain HTTP at a network address (a LAN, a cluster without TLS): not
// localhost, which browsers treat as secure. A page must not send the browser to https://
// on its own links (CSP upgrade-insecure-requests would: nothing answers TLS there).
describe("over plain HTTP at a network address", () => {
  let lan: Server | undefined;
  afterAll(async () => {
    lan?.closeAllConnections();
    if (lan) await new Promise((resolve) => lan!.close(resolve));
  });

  it("the landing page's link to the recipe stays on http:// and loads", async () => {
    const address = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === "IPv4" && !a.internal)?.address;
    if (!address) throw new Error("this machine has no non-loopback IPv4 address to serve the page on");
    lan = app.listen(0, address);
    await new Promise<void>((resolve) => lan!.once("listening", resolve));
    const origin = `http://${address}:${(lan.address() as AddressInfo).port}`;
    const page = await context.newPage();
    try {
      expect((await page.goto(`${origin}/`))?.status()).toBe(200);
      await Promise.all([
        page.waitForURL(/\/v1\/api$/, { waitUntil: "load" }).catch(() => undefined),
        page.click('a[href$="/v1/api"]'),
      ]);
      expect(page.url()).toBe(`${origin}/v1/api`);
      expect(await page.textContent("body")).toContain("/v1/open");
    } finally {
      await page.close();
    }
  });
});
