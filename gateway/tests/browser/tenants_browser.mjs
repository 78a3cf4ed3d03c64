// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// reads the operator console's Tenants view at ADMIN_URL/console/: the
// tenant's row shows its configured limits; then this script sends the
// tenant's requests to the API until some are refused (429, its request
// rate) and waits for the row's "limited" count to rise, by the next poll.
//
//   node tenants_browser.mjs ADMIN_URL TOKEN INFER_URL API_KEY TENANT SCREENSHOT_DIR
//
// Prints "N passed, 0 failed" and exits 0 when every check holds.
import { join } from "node:path";
import { runChecks } from "./browser_common.mjs";

const [adminUrl, token, inferUrl, apiKey, tenant, shots] = process.argv.slice(2);

const options = {
  name: "tenants",
  viewport: { width: 1400, height: 900 },
  // The page first tries to sign in without a token: that 401 is expected.
  ignoreConsole: "status of 401",
};
const body = JSON.stringify({ inputs: [{ name: "X", shape: [1, 64], datatype: "FP32", data: new Array(64).fill(1) }] });

await runChecks(options, async (page, check) => {
  await page.goto(`${adminUrl}/console`);
  await page.fill("#token", token);
  await page.click("#login-button");
  await page.waitForSelector("#app", { state: "visible" });

  const row = `#tenants-body tr[data-tenant="${tenant}"]`;
  await page.waitForSelector(row);
  check(await page.isHidden("#tenants-none"), "the no-tenant note is hidden");
  const limits = await page.textContent(`${row} td.limits`);
  check(limits.includes("all routes: 1/s (burst 2)") && limits.includes("1,000/day"), `the limits: ${limits}`);
  const count = async (cls) => Number((await page.textContent(`${row} td.${cls}`)).replace(/,/g, ""));
  const before = await count("limited");

  // Burst 2 at 1/s: a quick run of requests is refused before it ends.
  let refused = 0;
  let retryAfter = 0;
  for (let i = 0; i < 8; i += 1) {
    const r = await fetch(inferUrl, { method: "POST", headers: { "content-type": "application/json", "x-api-key": apiKey }, body });
    if (r.status === 429) {
      refused += 1;
      if (r.headers.get("retry-after")) retryAfter += 1;
    } else {
      check(r.status === 200, `an admitted request is answered (${r.status})`);
    }
  }
  check(refused > 0 && retryAfter === refused, `429s with Retry-After: ${retryAfter} of ${refused}`);
  await page.waitForFunction(
    ([sel, was]) => Number(document.querySelector(`${sel} td.limited`).textContent.replace(/,/g, "")) > was,
    [row, before],
    { timeout: 30000 },
  );
  check((await count("limited")) >= before + refused, "every refusal is counted");
  check((await page.textContent(`${row} td.limited-by`)).includes("requests: "), "refused by its request rate");
  check((await count("admitted")) >= 1, "admitted requests counted");
  const quota = await page.textContent(`${row} td.quota`);
  check(/all routes: [0-9,]+/.test(quota), `the daily quota left: ${quota}`);
  // Its admitted requests are class 2 (the default) in the classes table.
  await page.waitForFunction(
    () => Number(document.querySelector('#classes-body tr[data-class="2"] td.answered').textContent) > 0,
    null,
    { timeout: 30000 },
  );
  await page.screenshot({ path: join(shots, "console-tenants.png"), fullPage: true });
});
