// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// uses the operator console at ADMIN_URL/console/ while the Python test
// sends traffic: a wrong token is refused; the right one shows live numbers
// that move, charts and the calibration curve; a threshold edit shows its
// diff and replay, then applies, and /admin/config serves the new value.
//
//   node console_browser.mjs ADMIN_URL TOKEN ROUTE NEW_THRESHOLD SCREENSHOT_DIR
//
// Prints "N passed, 0 failed" and exits 0 when every check holds.
import { join } from "node:path";
import { runChecks } from "./browser_common.mjs";

const [adminUrl, token, route, threshold, shots] = process.argv.slice(2);

const number = (text) => Number(String(text).replace(/[^0-9.]/g, ""));

const options = {
  name: "console",
  viewport: { width: 1280, height: 900 },
  // The browser logs every 401 as an error: the refused sign-in is one on purpose.
  ignoreConsole: "status of 401",
};
await runChecks(options, async (page, check) => {
  // Without the token: the sign-in form stays, with the refusal, and no data.
  await page.goto(`${adminUrl}/console`);
  await page.fill("#token", "not-the-admin-token");
  await page.click("#login-button");
  await page.waitForFunction(() => document.querySelector("#login-error").textContent.includes("refused"));
  check(await page.isHidden("#app"), "no console without the token");
  check((await page.textContent("#routes-body")).trim() === "", "no route data without the token");
  await page.screenshot({ path: join(shots, "console-refused.png") });

  // With it: live numbers that move under the test's traffic.
  await page.fill("#token", token);
  await page.click("#login-button");
  await page.waitForSelector("#app", { state: "visible" });
  const answers = `[data-route="${route}"] .answers`;
  await page.waitForSelector(answers);
  const first = number(await page.textContent(answers));
  await page.waitForFunction(
    ([sel, before]) => Number(document.querySelector(sel).textContent.replace(/[^0-9.]/g, "")) > before,
    [answers, first],
    { timeout: 15000 },
  );
  const second = number(await page.textContent(answers));
  check(second > first, `answers move: ${first} -> ${second}`);
  await page.waitForFunction(
    (sel) => Number(document.querySelector(sel).textContent.replace(/[^0-9.]/g, "")) > 0,
    `[data-route="${route}"] .answers-rate`,
    { timeout: 15000 },
  );
  check(true, "answers/s above zero");
  check((await page.textContent(`[data-route="${route}"]`)).includes("cascade_"), "decisions by reason shown");
  const rowsRate = await page.textContent('[data-pool="digits-cheap/cpu"] .rows-rate');
  check(number(rowsRate) > 0, `the cheap pool executes rows: ${rowsRate}`);
  check(await page.isHidden("#no-charts"), "the build embeds the chart library");
  check((await page.locator("#chart-routes canvas").count()) === 1, "routes chart drawn");
  check((await page.locator("#chart-pools canvas").count()) === 1, "pools chart drawn");
  await page.waitForFunction(
    (r) => {
      const p = document.querySelector(`[data-calibration="${r}"] p`);
      return p && /[1-9][0-9,]* rows/.test(p.textContent);
    },
    route,
    { timeout: 20000 },
  );
  check((await page.locator(`[data-calibration="${route}"] canvas`).count()) === 1, "calibration curve drawn");
  await page.waitForTimeout(3000); // a few seconds of history in the charts
  await page.screenshot({ path: join(shots, "console-live.png"), fullPage: true });

  // Tune: preview (diff + replay), then apply through the reload path.
  await page.selectOption("#tune-route", route);
  await page.fill("#tune-threshold", threshold);
  await page.click("#tune-preview");
  await page.waitForFunction(() => !document.querySelector("#tune-replay").hidden, null, { timeout: 120000 });
  const diff = await page.textContent("#tune-diff");
  check(diff.includes(`threshold = ${threshold}`) && diff.includes("+"), `the diff shows the new threshold:\n${diff}`);
  const head = await page.textContent("#tune-replay thead");
  check(head.includes("candidate"), `the replay compares with the candidate: ${head}`);
  const escalated = await page.textContent('#tune-replay [data-metric="escalated"]');
  check(/%.*%/.test(escalated), `escalation shown for both configs: ${escalated}`);
  check(await page.isEnabled("#tune-apply"), "apply offered after the preview");
  await page.screenshot({ path: join(shots, "console-preview.png"), fullPage: true });
  await page.click("#tune-apply");
  await page.waitForFunction(() => document.querySelector("#tune-status").textContent.startsWith("Applied"), null,
    { timeout: 60000 });
  const served = await (await fetch(`${adminUrl}/admin/config`, { headers: { authorization: `Bearer ${token}` } })).json();
  const policy = served.config.routes.find((r) => r.name === route).policy;
  check(Math.abs(policy.threshold - Number(threshold)) < 1e-6, `/admin/config serves threshold ${policy.threshold}`);
  const shown = await page.inputValue("#tune-threshold");
  check(shown === threshold, `the form shows the applied value: ${shown}`);
  await page.screenshot({ path: join(shots, "console-applied.png"), fullPage: true });
});
