// What the headless Chromium tests share: Debian's /usr/bin/chromium (or
// CHROMIUM_BIN) launched through playwright-core in a throwaway profile, one
// page whose script errors are collected, a counter of checks that held, and
// the "N passed, 0 failed" line the Python tests look for.
//
// Use `runChecks` for a script made of checks; `launch` when the script
// only reports what the browser did and the Python test judges it.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";
const ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

/// Launches Chromium in a fresh profile under the temp dir named after
/// `name`; `options` are added to playwright's launch options (viewport...).
/// Returns the browser context and `close`, which also removes the profile.
export async function launch(name, options = {}) {
  const userDataDir = mkdtempSync(join(tmpdir(), `switchyard-${name}-`));
  const removeProfile = () => rmSync(userDataDir, { recursive: true, force: true });
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      ...options,
    });
  } catch (e) {
    removeProfile();
    throw e;
  }
  const close = async () => {
    try {
      await context.close();
    } finally {
      removeProfile();
    }
  };
  return { context, close };
}

/// Runs `body(page, check)` on a new page of a fresh browser, then checks
/// that the page logged no script errors (console errors containing
/// `ignoreConsole`, an expected refusal, excepted). Prints
/// "N passed, 0 failed", or "N passed, 1 failed" and the failure with exit
/// code 1; closes the browser either way.
export async function runChecks({ name, viewport, ignoreConsole }, body) {
  let passed = 0;
  const check = (condition, message) => {
    if (!condition) throw new Error(`assertion failed: ${message}`);
    passed += 1;
  };
  let browser;
  try {
    browser = await launch(name, { viewport });
    const page = await browser.context.newPage();
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("console", (m) => {
      const ignored = ignoreConsole !== undefined && m.text().includes(ignoreConsole);
      if (m.type() === "error" && !ignored) pageErrors.push(m.text());
    });
    await body(page, check);
    check(pageErrors.length === 0, `no script errors: ${pageErrors.join("; ")}`);
    console.log(`${passed} passed, 0 failed`);
  } catch (e) {
    console.log(`${passed} passed, 1 failed`);
    console.error(e.stack || String(e));
    process.exitCode = 1;
  } finally {
    if (browser) await browser.close();
  }
}
