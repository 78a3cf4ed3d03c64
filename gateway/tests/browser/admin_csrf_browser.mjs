// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// against an admin listener without a token (test_admin_csrf.py):
//
//   node admin_csrf_browser.mjs foreign PAGE_URL   # a page of another origin runs window.attack()
//   node admin_csrf_browser.mjs console ADMIN_URL  # the console page posts a threshold edit
//
// Prints "foreign page done: ..." or "console applied STATUS"; the Python
// test checks what the gateway did. Exits 1 on a script failure.
import { launch } from "./browser_common.mjs";

const [mode, url] = process.argv.slice(2);
let browser;
try {
  browser = await launch("csrf");
  const page = await browser.context.newPage();
  if (mode === "foreign") {
    await page.goto(url);
    const done = await page.evaluate(() => window.attack());
    console.log(`foreign page done: ${done.join(", ")}`);
  } else if (mode === "console") {
    await page.goto(`${url}/console/`);
    const status = await page.evaluate(async () => {
      const res = await fetch("/admin/config/edit", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ route: "digits", threshold: 0.65, apply: true }),
      });
      return `${res.status} ${await res.text()}`;
    });
    console.log(`console applied ${status}`);
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} catch (e) {
  console.log(`FAILED: ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
}
