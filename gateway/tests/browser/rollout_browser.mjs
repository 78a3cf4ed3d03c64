// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// uses the operator console's Rollouts view at ADMIN_URL/console/ while the
// Python test sends traffic: the route's candidate row shows the
// comparison (agreement with its interval, rows, p99 of both sides) and the
// plan's step; Promote applies at once, the row then says promoted by the
// operator, and /admin/stats shows the candidate in force.
//
//   node rollout_browser.mjs ADMIN_URL TOKEN ROUTE CANDIDATE SCREENSHOT_DIR [MODE]
//
// MODE: how the step's share is used, "mirrored" (default) or "canary".
//
// Prints "N passed, 0 failed" and exits 0 when every check holds.
import { join } from "node:path";
import { runChecks } from "./browser_common.mjs";

const [adminUrl, token, route, candidate, shots, mode = "mirrored"] = process.argv.slice(2);

const options = {
  name: "rollout",
  viewport: { width: 1400, height: 900 },
  // The page first tries to sign in without a token: that 401 is expected.
  ignoreConsole: "status of 401",
};
await runChecks(options, async (page, check) => {
  await page.goto(`${adminUrl}/console`);
  await page.fill("#token", token);
  await page.click("#login-button");
  await page.waitForSelector("#app", { state: "visible" });

  const row = `#rollouts-body tr[data-rollout="${route}"]`;
  await page.waitForSelector(row);
  check(await page.isHidden("#rollouts-none"), "the no-candidate note is hidden");
  check((await page.textContent(`${row} td.candidate`)) === candidate, "the candidate is named");
  // The comparison fills in under the test's traffic.
  await page.waitForFunction(
    (sel) => /[1-9]/.test(document.querySelector(`${sel} td.rows`).textContent.split(" ")[0]),
    row,
    { timeout: 60000 },
  );
  const agreement = await page.textContent(`${row} td.agreement`);
  check(/^100\.00 % \[9\d\.\d\d %, 100\.00 %\]$/.test(agreement), `agreement with its interval: ${agreement}`);
  const p99 = await page.textContent(`${row} td.p99`);
  check(/^[0-9.,]+ · [0-9.,]+$/.test(p99), `p99 of both sides: ${p99}`);
  const step = await page.textContent(`${row} td.step`);
  check(step.startsWith(`step 1 of 2 · ${mode} `), `the plan's first step, ${mode}: ${step}`);
  check((await page.textContent(`${row} td.state`)).startsWith("mirroring"), "mirroring");
  check((await page.textContent(`${row} td.verdict`)) === "wait", "the gate waits for its rows");
  const rows = await page.textContent(`${row} td.rows`);
  check(/\(draws skipped: [0-9,]+ busy, [0-9,]+ CPU\)$/.test(rows), `draws skipped, by cause: ${rows}`);
  await page.screenshot({ path: join(shots, "console-rollout.png"), fullPage: true });

  await page.click(`${row} button.promote`);
  await page.waitForFunction(() => document.querySelector("#rollouts-status").textContent.startsWith("Promoted"), null,
    { timeout: 60000 });
  await page.waitForFunction(
    (sel) => document.querySelector(`${sel} td.state`).textContent === "promoted (operator)",
    row,
    { timeout: 15000 },
  );
  check(await page.isDisabled(`${row} button.promote`), "no second promotion");
  const stats = await (await fetch(`${adminUrl}/admin/stats`, { headers: { authorization: `Bearer ${token}` } })).json();
  const inForce = stats.rollouts[route].in_force;
  check(JSON.stringify(inForce.models) === JSON.stringify([candidate]), `the candidate serves: ${JSON.stringify(inForce)}`);
  await page.screenshot({ path: join(shots, "console-rollout-promoted.png"), fullPage: true });
});
