// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// reads the rendered book (mdBook's output, served by the Python test):
// the start page and the configuration reference render (title, headings,
// sidebar), and the book's search box, typed into as a reader does, finds
// a config field with a result that links to the configuration
// reference; following it shows the field on that page.
//
//   node book_browser.mjs BOOK_URL FIELD SCREENSHOT_DIR
//
// Prints "N passed, 0 failed" and exits 0 when every check holds.
import { join } from "node:path";
import { runChecks } from "./browser_common.mjs";

const [bookUrl, field, shots] = process.argv.slice(2);
const REFERENCE = /reference\/(configuration|config-fields)\.html/;

const headings = (page, sel) =>
  page.$$eval(sel, (els) => els.map((e) => e.textContent.trim()));

await runChecks({ name: "book", viewport: { width: 1280, height: 900 } }, async (page, check) => {
  // The start page: the book's title, the introduction, the sidebar's chapters.
  const start = await page.goto(`${bookUrl}/index.html`);
  check(start.ok(), `start page answers ${start.status()}`);
  check((await page.title()).includes("Switchyard"), `start page title: ${await page.title()}`);
  const h1 = await headings(page, "main h1");
  check(h1.includes("Introduction"), `start page heading: ${h1}`);
  check((await page.textContent("main")).includes("routing gateway"), "the README's introduction is included");
  await page.waitForSelector("#mdbook-sidebar a[href$='config-fields.html']", { state: "attached" });
  const sidebar = await page.textContent("#mdbook-sidebar");
  for (const chapter of ["Quick start", "Configuration", "Configuration fields", "Metrics"]) {
    check(sidebar.includes(chapter), `sidebar lists ${chapter}`);
  }
  await page.screenshot({ path: join(shots, "book-start.png") });

  // The configuration reference: its title, a heading per section, the field's row.
  const ref = await page.goto(`${bookUrl}/reference/configuration.html`);
  check(ref.ok(), `configuration page answers ${ref.status()}`);
  check((await page.title()).startsWith("Configuration"), `configuration page title: ${await page.title()}`);
  check((await headings(page, "main h1")).includes("Configuration"), "configuration page heading");
  check((await page.locator("main table tr").count()) >= 50, "configuration page has its table of fields");
  check((await page.textContent("main")).includes(field), `the configuration page documents ${field}`);
  const fields = await page.goto(`${bookUrl}/reference/config-fields.html`);
  check(fields.ok(), `field reference answers ${fields.status()}`);
  const sections = await headings(page, "main h2");
  for (const section of ["server", "models[]", "routes[]", "cache"]) {
    check(sections.includes(section), `field reference has a ${section} section: ${sections}`);
  }
  check((await page.locator("main table").count()) >= 5, "field reference has its tables");

  // The search box: type the field as a reader would, see results, one of
  // them on the configuration reference, naming the field.
  await page.goto(`${bookUrl}/index.html`);
  await page.click("#mdbook-search-toggle");
  await page.waitForSelector("#mdbook-searchbar", { state: "visible" });
  await page.locator("#mdbook-searchbar").pressSequentially(field, { delay: 10 });
  // The header names the term once the whole of it was searched (the index
  // loads in the background; mdBook searches the box's text when it lands).
  await page.waitForFunction(
    (term) => document.querySelector("#mdbook-searchresults-header").textContent.includes(`'${term}'`),
    field,
    { timeout: 15000 },
  );
  const header = (await page.textContent("#mdbook-searchresults-header")).trim();
  const results = await page.$$eval("#mdbook-searchresults li a", (as) =>
    as.map((a) => ({ href: a.getAttribute("href"), text: a.parentElement.textContent })));
  await page.screenshot({ path: join(shots, "book-search.png") });
  check(results.length > 0, `search for ${field} finds something: ${header}`);
  const hit = results.find((r) => REFERENCE.test(r.href) && r.text.includes(field));
  check(hit !== undefined, `a result on the configuration reference names ${field}: ${JSON.stringify(results)}`);

  // Following it lands on the reference, the field on the page and marked.
  await page.click(`#mdbook-searchresults li a[href="${hit.href}"]`);
  await page.waitForURL(REFERENCE);
  check((await page.textContent("main")).includes(field), `the page it opens shows ${field}`);
  await page.waitForSelector("main mark", { timeout: 5000 });
  const marked = await page.$$eval("main mark", (ms) => ms.map((m) => m.textContent));
  check(marked.some((m) => field.includes(m) || m.includes(field)), `the search term is marked: ${marked}`);
  await page.screenshot({ path: join(shots, "book-result.png") });

});
