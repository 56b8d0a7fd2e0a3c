// The dev stack the tests run against: the one scripts/clients-test.sh started (ASK_URL and
// ASK_IDP), or, when those are unset, one this process builds and starts from
// cmd/clients-stack and stops when the tests end.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";

export interface StackURLs {
  ask: string;
  idp: string;
}

let started: Promise<StackURLs> | undefined;

/** stack returns the URLs of the dev stack, starting one on first use when none was given. */
export function stack(): Promise<StackURLs> {
  if (process.env.ASK_URL && process.env.ASK_IDP) {
    return Promise.resolve({ ask: process.env.ASK_URL, idp: process.env.ASK_IDP });
  }
  started ??= startStack();
  return started;
}

async function startStack(): Promise<StackURLs> {
  const repo = resolve(import.meta.dirname, "../../../..");
  const dir = mkdtempSync(join(tmpdir(), "ask-ts-stack-"));
  const bin = join(dir, "clients-stack");
  const build = spawnSync("go", ["build", "-o", bin, "./cmd/clients-stack"], { cwd: repo, stdio: "inherit" });
  if (build.status !== 0) throw new Error("go build ./cmd/clients-stack failed");
  const urls = join(dir, "urls.json");
  const child: ChildProcess = spawn(bin, ["-urls", urls], { stdio: ["ignore", "ignore", "inherit"] });
  // Stopped when this test process exits; unref so the stack does not keep the process alive.
  child.unref();
  process.on("exit", () => {
    child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });
  for (let i = 0; i < 300; i++) {
    if (existsSync(urls)) {
      const u = JSON.parse(readFileSync(urls, "utf8")) as StackURLs;
      return { ask: u.ask, idp: u.idp };
    }
    if (child.exitCode !== null) throw new Error(`clients-stack exited with ${child.exitCode}`);
    await delay(100);
  }
  throw new Error("clients-stack did not start within 30 s");
}

/** token mints a bearer for oid from the dev identity provider (loopback only). */
export async function token(oid: string): Promise<string> {
  const { idp } = await stack();
  const resp = await fetch(`${idp}/token`, { method: "POST", body: new URLSearchParams({ oid }) });
  if (!resp.ok) throw new Error(`minting a token for ${oid}: HTTP ${resp.status}`);
  const body = (await resp.json()) as { access_token: string };
  return body.access_token;
}
