// The generated types are the contract in this language: if the spec renames a field the client
// reads, the client no longer compiles. Shown once here with `headline` (read by describeOutcome),
// renamed in a copy of the spec; and, as a control, the unchanged spec compiles.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, test } from "node:test";

const pkg = resolve(import.meta.dirname, "../..");
const spec = readFileSync(resolve(pkg, "../../openapi/ask.openapi.yaml"), "utf8");

/** compileAgainst generates the types from specText into a copy of the client and type-checks it. */
function compileAgainst(dir: string, specText: string): { status: number | null; output: string } {
  rmSync(dir, { recursive: true, force: true });
  cpSync(join(pkg, "src"), join(dir, "src"), { recursive: true });
  symlinkSync(join(pkg, "node_modules"), join(dir, "node_modules"), "dir");
  writeFileSync(join(dir, "tsconfig.json"), readFileSync(join(pkg, "tsconfig.json"), "utf8").replace('"test/**/*.ts"', '"src/**/*.ts"'));
  writeFileSync(join(dir, "ask.openapi.yaml"), specText);
  const gen = spawnSync(process.execPath, [join(pkg, "node_modules/openapi-typescript/bin/cli.js"), "ask.openapi.yaml", "--output", "src/schema.d.ts"], { cwd: dir, encoding: "utf8" });
  assert.equal(gen.status, 0, `openapi-typescript failed: ${gen.stderr}`);
  const tsc = spawnSync(process.execPath, [join(pkg, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json", "--noEmit"], { cwd: dir, encoding: "utf8" });
  return { status: tsc.status, output: tsc.stdout + tsc.stderr };
}

describe("spec drift breaks the TypeScript build", () => {
  const root = mkdtempSync(join(tmpdir(), "ask-ts-drift-"));
  after(() => rmSync(root, { recursive: true, force: true }));

  test("the client compiles against the spec as it is", () => {
    const { status, output } = compileAgainst(join(root, "same"), spec);
    assert.equal(status, 0, output);
  });

  test("renaming answer.headline in the spec fails the compile where the client reads it", () => {
    const field = "        headline:\n          $ref: '#/components/schemas/Headline'\n";
    assert.ok(spec.includes(field), "the spec still has AnswerBody.headline as this test expects");
    const { status, output } = compileAgainst(join(root, "renamed"), spec.replace(field, field.replace("headline:", "lead_figure:")));
    assert.notEqual(status, 0, "tsc --noEmit must fail");
    assert.match(output, /src\/present\.ts\(\d+,\d+\): error TS2339: Property 'headline' does not exist/, output);
    console.log(output.trim());
  });
});
