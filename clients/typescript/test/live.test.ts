// Against a running Engram (tests/e2e/test_typescript_client.py starts it and sets the variables):
// every operation of the contract called at least once, and the error codes mapped.
//   ENGRAM_URL        the service, e.g. http://127.0.0.1:8000
//   ENGRAM_ADMIN_KEY  a key with the admin role (privacy and quarantine routes)
//   ENGRAM_APP_KEY    a key limited to the app "ts-shop"

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  type CallOptions,
  EngramClient,
  EngramError,
  ErrorCode,
  OPERATION_PATHS,
  type OperationName,
  type OperationTypes,
  type TaskView,
} from "../src/index.js";

const URL_ = process.env.ENGRAM_URL;
const ADMIN = process.env.ENGRAM_ADMIN_KEY;
const APP_KEY = process.env.ENGRAM_APP_KEY;
const skip = URL_ && ADMIN && APP_KEY ? false : "ENGRAM_URL, ENGRAM_ADMIN_KEY and ENGRAM_APP_KEY are not set";

/** The client, recording which operations it sent. */
class RecordingClient extends EngramClient {
  readonly sent = new Set<OperationName>();

  protected override send<N extends OperationName>(
    name: N,
    request: OperationTypes[N]["request"],
    options?: CallOptions,
  ): Promise<OperationTypes[N]["response"]> {
    this.sent.add(name);
    return super.send(name, request, options);
  }
}

async function failure(pending: Promise<unknown>): Promise<EngramError> {
  const error = await pending.then(
    () => assert.fail("expected an EngramError"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof EngramError, String(error));
  return error;
}

describe("a live Engram", { skip }, () => {
  const client = new RecordingClient({ baseUrl: URL_ ?? "", apiKey: ADMIN, timeoutMs: 60_000 });
  const user = `ts-${randomUUID()}`;
  const app = "ts-shop";

  /** Polls a task until it is finished; the service's own progress decides, within a bound. */
  async function finished(taskId: string): Promise<TaskView> {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const task = await client.task({ task_id: taskId });
      if (task.status === "DONE" || task.status === "FAILED") return task;
      assert.ok(Date.now() < deadline, `task ${taskId} still ${task.status}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  after(() => {
    if (skip) return;
    const missing = Object.keys(OPERATION_PATHS).filter((name) => !client.sent.has(name as OperationName));
    assert.deepEqual(missing, [], "operations never called");
  });

  test("health, and the service's OpenAPI document is the one the client was generated from", async () => {
    assert.equal((await client.health()).status, "ok");
    const served: unknown = await (await fetch(`${URL_}/openapi.json`)).json();
    const checkedIn: unknown = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8"));
    assert.deepEqual(served, checkedIn, "run python -m engram.serve.typescript_client");
  });

  test("writes, recall, edits and history", async () => {
    const accepted = await client.add({
      user_id: user,
      app_id: app,
      messages: [{ role: "user", content: "I moved to Porto last spring." }],
    });
    assert.equal(accepted.accepted, true);
    assert.equal((await finished(accepted.task_id)).status, "DONE");

    const made = await client.addStructured({
      user_id: user,
      app_id: app,
      ownership: "USER",
      mem_type: "SEMANTIC",
      content: "Prefers taking a taxi to work",
      sync: true,
    });
    assert.ok("memory_id" in made);
    const batch = await client.batchAddStructured({
      user_id: user,
      app_id: app,
      sync: true,
      items: ["Keeps a cat named Miso", "Plays the cello", "Drinks green tea"].map((content) => ({
        ownership: "USER" as const,
        mem_type: "SEMANTIC" as const,
        content,
      })),
    });
    assert.ok("items" in batch);
    assert.deepEqual(batch.items.map((i) => i.code), [0, 0, 0]);

    const recalled = await client.recall({ user_id: user, query: "how do I get to work?", scope: { app_id: app } });
    assert.equal(recalled.hit, true);
    assert.ok(recalled.memories.some((m) => m.memory_id === made.memory_id));
    const nothing = await client.recall({ user_id: `ts-${randomUUID()}`, query: "anything at all" });
    assert.deepEqual([nothing.hit, nothing.memories], [false, []]);

    const updated = await client.update({ user_id: user, memory_id: made.memory_id, content: "Prefers cycling to work" });
    assert.equal(updated.content, "Prefers cycling to work");
    const history = await client.history({ user_id: user, memory_id: made.memory_id });
    assert.deepEqual(new Set(history.changes.map((c) => c.op_type)), new Set(["ADD", "UPDATE"]));

    const changes = [];
    for await (const change of client.iterChangeLog({ user_id: user, app_id: app, limit: 2 })) changes.push(change);
    assert.ok(changes.length >= 6, `${changes.length} changes`); // 1+ extracted, 1, 3, the update
    assert.equal(new Set(changes.map((c) => c.change_id)).size, changes.length);
    assert.ok((await client.profile({ user_id: user, app_id: app })) !== null);

    const [first, ...rest] = batch.items.map((i) => i.memory_id ?? "");
    assert.deepEqual((await client.delete({ user_id: user, memory_id: first ?? "" })).deleted, [first]);
    const gone = await client.batchDelete({ user_id: user, memory_ids: [...rest, "0".repeat(32)] });
    assert.deepEqual([gone.deleted.sort(), gone.not_found], [[...rest].sort(), ["0".repeat(32)]]);

    const error = await failure(client.restore({ user_id: user, memory_id: made.memory_id }));
    assert.equal(error.code, ErrorCode.NOT_FOUND); // active, not archived
  });

  test("the README's example runs", () => {
    const example = fileURLToPath(new URL("../examples/quickstart.js", import.meta.url));
    const env = { ...process.env, ENGRAM_API_KEY: ADMIN };
    const output = execFileSync(process.execPath, [example], { env, encoding: "utf8", timeout: 120_000 });
    assert.match(output, /I prefer taking a taxi to work\./);
    assert.match(output, /no such memory \(trace [0-9a-f]+\)/);
  });

  test("sessions close", async () => {
    await client.addStructured({
      user_id: user,
      app_id: app,
      session_id: "s1",
      level: "SESSION",
      ownership: "USER",
      mem_type: "EPISODIC",
      content: "Is packing for a trip to Lisbon",
      sync: true,
    });
    const closed = await client.sessionClose({ user_id: user, app_id: app, session_id: "s1" });
    assert.equal(closed.promoted.length + closed.dropped.length + closed.capacity_refused.length, 1);
  });

  test("admin: list, switch, export, import, purge, quarantine", async () => {
    const listed = [];
    for await (const memory of client.iterUserList({ user_id: user, app_id: app, status: "ACTIVE", limit: 1 })) {
      listed.push(memory.memory_id);
    }
    assert.ok(listed.length >= 2 && new Set(listed).size === listed.length, `${listed.length} listed`);

    const off = await client.userSwitch({ user_id: user, app_id: app, enabled: false });
    assert.equal(off.apps[app], false);
    const refused = await failure(client.add({ user_id: user, app_id: app, messages: [{ role: "user", content: "x" }] }));
    assert.equal(refused.code, ErrorCode.MEMORY_SWITCHED_OFF);
    await client.userSwitch({ user_id: user, app_id: app, enabled: true });
    assert.equal((await client.userSwitch({ user_id: user })).apps[app], true);

    const exported = await client.userExport({ user_id: user });
    assert.equal((await finished(exported.task_id)).status, "DONE");
    const lines: string[] = [];
    for await (const line of client.exportLines({ user_id: user, task_id: exported.task_id })) lines.push(line);
    assert.ok(lines.length >= listed.length, `${lines.length} lines`);
    const copy = `ts-${randomUUID()}`;
    const imported = await client.userImport({ user_id: copy, lines });
    // An export also holds lines that are no memory (the profile's): the active memories come back.
    assert.ok(imported.added >= listed.length, `${imported.added} added`);
    const purged = await client.userPurge({ user_id: copy });
    assert.equal(purged.purged, imported.added);

    const held = [];
    for await (const memory of client.iterQuarantine({ user_id: user })) held.push(memory);
    assert.deepEqual(held, []);
    const none = ["1".repeat(32)];
    assert.deepEqual((await client.quarantineRelease({ user_id: user, memory_ids: none })).not_held, none);
    assert.deepEqual((await client.quarantineDelete({ user_id: user, memory_ids: none })).not_held, none);
  });

  test("error codes: bad input, unknown task, no key, another tenant's app, a user route without admin", async () => {
    const bad = await failure(
      client.addStructured(
        { user_id: user, ownership: "USER", mem_type: "SEMANTIC", content: "" },
        { traceId: "ts-bad-input" },
      ),
    );
    assert.deepEqual([bad.code, bad.status, bad.traceId], [ErrorCode.BAD_PARAMETER, 400, "ts-bad-input"]);
    assert.equal((await failure(client.task({ task_id: "f".repeat(32) }))).code, ErrorCode.NOT_FOUND);

    const anonymous = new EngramClient({ baseUrl: URL_ ?? "" });
    assert.equal((await failure(anonymous.recall({ user_id: user, query: "q" }))).code, ErrorCode.UNAUTHENTICATED);
    const tenant = new EngramClient({ baseUrl: URL_ ?? "", apiKey: APP_KEY });
    const other = await failure(tenant.recall({ user_id: user, query: "q", scope: { app_id: "not-ts-shop" } }));
    assert.equal(other.code, ErrorCode.FORBIDDEN);
    assert.equal((await failure(tenant.userList({ user_id: user }))).code, ErrorCode.FORBIDDEN);
    const own = await tenant.recall({ user_id: user, query: "what does the user drink?", scope: { app_id: app } });
    assert.equal(typeof own.hit, "boolean");
  });
});
