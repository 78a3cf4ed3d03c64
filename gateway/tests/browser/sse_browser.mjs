// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// loads sse-demo.html at the gateway's origin and streams one infer call.
// The heavy model's pool is paused until the page shows the draft, so the
// test proves the browser renders the draft before the final exists, then
// the final once the pool resumes.
//
//   node sse_browser.mjs BASE_URL ADMIN_URL ROUTE HEAVY_MODEL BODY_JSON_FILE [SCREENSHOT_DIR]
//
// Exits 0 and prints "1 passed, 0 failed" on success.
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { launch } from "./browser_common.mjs";

const [base, adminUrl, route, heavy, bodyFile, shots] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const page_html = readFileSync(join(here, "sse-demo.html"), "utf8");
const body = JSON.parse(readFileSync(bodyFile, "utf8"));

function check(condition, message) {
  if (!condition) throw new Error(`assertion failed: ${message}`);
}

async function pool(action) {
  const r = await fetch(`${adminUrl}/admin/models/${heavy}/pools/cpu/${action}`, { method: "POST" });
  check(r.ok, `${action} answered ${r.status}`);
}

let browser;
try {
  browser = await launch("chromium");
  const { context } = browser;
  // The page is served at the gateway's own origin, so its fetch is same-origin.
  await context.route(`${base}/sse-demo.html`, r => r.fulfill({ contentType: "text/html", body: page_html }));
  const page = await context.newPage();
  await page.goto(`${base}/sse-demo.html`);
  await pool("pause");
  let done;
  try {
    done = page.evaluate(([route, body]) => window.runStream(route, body), [route, body]);
    await page.waitForFunction(() => window.events.length >= 1, null, { timeout: 20000 });
    const seen = await page.evaluate(() => window.events.map(e => e.name));
    check(JSON.stringify(seen) === '["draft"]', `only the draft while the heavy model is held, got ${seen}`);
    const draftText = await page.textContent("#draft");
    check(draftText.includes("draft from"), `draft card shows the draft: ${draftText}`);
    check((await page.textContent("#final")).includes("waiting"), "final card still waiting");
    if (shots) await page.screenshot({ path: join(shots, "sse-draft.png") });
  } finally {
    await pool("resume");
  }
  const names = await done;
  check(JSON.stringify(names) === '["draft","final"]', `events in order, got ${names}`);
  const events = await page.evaluate(() => window.events);
  check(events[0].body.parameters.stage === "draft" && events[1].body.parameters.stage === "final", "stages");
  check(events[1].body.parameters.model === heavy, `final from ${heavy}: ${events[1].body.parameters.model}`);
  check(events[0].at < events[1].at, "draft rendered before final");
  check((await page.evaluate(() => window.contentType)) === "text/event-stream", "content type");
  const finalText = await page.textContent("#final");
  check(finalText.includes(`final from ${heavy}`), `final card shows the final: ${finalText}`);
  if (shots) await page.screenshot({ path: join(shots, "sse-final.png") });
  console.log(JSON.stringify({ events: events.map(e => [e.name, e.body.parameters.model, Math.round(e.at)]) }));
  console.log("1 passed, 0 failed");
} catch (err) {
  console.error(err.stack || String(err));
  console.log("0 passed, 1 failed");
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
}
