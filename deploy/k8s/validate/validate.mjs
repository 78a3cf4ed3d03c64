// Offline schema validation of Kubernetes manifests (make test).
//
//   node deploy/k8s/validate/validate.mjs PATH...
//
// PATH is a YAML file, a folder (every *.yaml in it, recursively, except
// kustomization.yaml and node_modules), or `-k DIR`: the output of
// `kubectl kustomize DIR` (an overlay, after patches and generators).
// Every object is checked against the official OpenAPI / CRD schema of its
// apiVersion and kind, as shipped in the npm packages kubernetes-models
// (Kubernetes), @kubernetes-models/knative, /keda and /prometheus-operator:
// no cluster and no network. An object whose apiVersion/kind has no schema
// is an error, never a silent pass. Prints one line per problem
// (source, kind/name, JSON path, message) and exits 1 on any.
//
// Limit: these schemas check types, required fields and enums; like the
// API server without `--validate=strict`, they accept unknown fields.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const HERE = dirname(fileURLToPath(import.meta.url));

// apiVersion group -> module folder of the package that carries its schemas.
function modulePath(apiVersion, kind) {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    if (!/^[A-Za-z0-9]+$/.test(kind) || !/^[a-z0-9]+$/.test(version)) return null;
    let pkg;
    if (group === "") pkg = join("kubernetes-models", version);
    else if (group.endsWith("knative.dev")) pkg = join("@kubernetes-models/knative", group, version);
    else if (group === "keda.sh" || group === "eventing.keda.sh") pkg = join("@kubernetes-models/keda", group, version);
    else if (group === "monitoring.coreos.com") pkg = join("@kubernetes-models/prometheus-operator", group, version);
    else if (!group.includes(".") || group.endsWith(".k8s.io")) pkg = join("kubernetes-models", group, version);
    else return null;
    return join(HERE, "node_modules", pkg, `${kind}.js`);
}

async function validateObject(obj) {
    if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return ["not a mapping"];
    const { apiVersion, kind } = obj;
    if (typeof apiVersion !== "string" || typeof kind !== "string") return ["apiVersion and kind are required strings"];
    const file = modulePath(apiVersion, kind);
    if (!file || !existsSync(file)) return [`no schema for ${apiVersion} ${kind}`];
    const Model = (await import(file))[kind];
    if (typeof Model !== "function") return [`no model class ${kind} in ${file}`];
    try {
        new Model(obj).validate();
        return [];
    } catch (err) {
        const list = Array.isArray(err?.errors) && err.errors.length ? err.errors : null;
        if (!list) return [String(err?.message ?? err)];
        return list.map((e) => `${e.instancePath || "/"} ${e.message}${e.params ? " " + JSON.stringify(e.params) : ""}`);
    }
}

function yamlFiles(path) {
    if (statSync(path).isFile()) return [path];
    const out = [];
    for (const name of readdirSync(path).sort()) {
        const full = join(path, name);
        if (name === "node_modules" || name.startsWith(".")) continue;
        if (statSync(full).isDirectory()) out.push(...yamlFiles(full));
        else if (/\.ya?ml$/.test(name) && name !== "kustomization.yaml") out.push(full);
    }
    return out;
}

function render(dir) {
    return execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

// [source, text] pairs from the command line.
function sources(args) {
    const out = [];
    for (let i = 0; i < args.length; i++) {
        if (args[i] === "-k") {
            const dir = args[++i];
            if (!dir) throw new Error("-k needs a folder");
            out.push([`kustomize ${dir}`, render(dir)]);
        } else {
            for (const f of yamlFiles(args[i])) out.push([f, readFileSync(f, "utf8")]);
        }
    }
    return out;
}

async function main(args) {
    if (args.length === 0) {
        console.error("usage: validate.mjs (FILE | DIR | -k KUSTOMIZE_DIR)...");
        return 2;
    }
    let objects = 0;
    let problems = 0;
    const kinds = new Map();
    for (const [source, text] of sources(args)) {
        for (const doc of parseAllDocuments(text)) {
            const where = `${source}`;
            if (doc.errors.length) {
                for (const e of doc.errors) console.log(`FAIL ${where}: YAML: ${e.message}`);
                problems += doc.errors.length;
                continue;
            }
            const obj = doc.toJS();
            if (obj === null || obj === undefined) continue;
            objects++;
            const name = `${obj?.kind ?? "?"}/${obj?.metadata?.name ?? "?"}`;
            const errors = await validateObject(obj);
            for (const e of errors) console.log(`FAIL ${where}: ${obj?.apiVersion ?? "?"} ${name}: ${e}`);
            problems += errors.length;
            const key = `${obj?.apiVersion} ${obj?.kind}`;
            kinds.set(key, (kinds.get(key) ?? 0) + 1);
        }
    }
    const summary = [...kinds].map(([k, n]) => `${k} x${n}`).sort().join(", ");
    console.log(`${objects} object(s) checked, ${problems} problem(s): ${summary}`);
    return problems === 0 && objects > 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2)).catch((err) => {
    console.log(`FAIL ${err?.message ?? err}`);
    return 1;
});
