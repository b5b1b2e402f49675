// What holds without a service: the generated contract matches openapi.json, and the retry rules
// (against a loopback HTTP server that answers as Engram, or a proxy in front of it, would).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import { DEFAULT_RETRY, EngramClient, EngramError, ErrorCode, OPERATION_PATHS, backoffMs } from "../src/index.js";

const ROOT = new URL("../../", import.meta.url); // build/test/ -> the package

describe("the generated contract", () => {
  test("generated.ts was made from the openapi.json beside it", () => {
    const document = readFileSync(new URL("openapi.json", ROOT));
    const generated = readFileSync(new URL("src/generated.ts", ROOT), "utf8");
    const recorded = /openapi\.json sha256: ([0-9a-f]{64})/.exec(generated)?.[1];
    assert.equal(recorded, createHash("sha256").update(document).digest("hex"), "run python -m engram.serve.typescript_client");
  });

  test("every enveloped route of the document is a method of the client", () => {
    const document = JSON.parse(readFileSync(new URL("openapi.json", ROOT), "utf8")) as {
      paths: Record<string, { post?: { operationId: string; responses: Record<string, unknown> } }>;
    };
    const routes = Object.entries(document.paths)
      .filter(([, methods]) => JSON.stringify(methods.post?.responses["200"] ?? "").includes("Envelope_"))
      .map(([path, methods]) => [methods.post?.operationId, path]);
    assert.ok(routes.length >= 21, `only ${routes.length} routes`);
    assert.deepEqual(Object.entries(OPERATION_PATHS), routes);
    for (const [name] of routes) {
      const method = String(name).replace(/_(.)/g, (_, c: string) => c.toUpperCase());
      assert.equal(typeof (EngramClient.prototype as unknown as Record<string, unknown>)[method], "function", method);
    }
  });

  test("the README's example is examples/quickstart.ts, which the live suite runs", () => {
    const readme = readFileSync(new URL("README.md", ROOT), "utf8");
    const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    const example = readFileSync(new URL("examples/quickstart.ts", ROOT), "utf8");
    assert.ok(block.length > 0);
    assert.equal(example.slice(example.indexOf("\n\n") + 2), block.replace('"@engram/client"', '"../src/index.js"'));
  });

  test("docs/agents.md shows the start of that example, as it is", () => {
    const readme = readFileSync(new URL("README.md", ROOT), "utf8");
    const agents = readFileSync(new URL("../../docs/agents.md", ROOT), "utf8");
    const section = agents.slice(agents.indexOf("## The TypeScript client"));
    const shown = /```ts\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
    assert.ok(shown.length > 0);
    assert.ok(/```ts\n([\s\S]*?)```/.exec(readme)?.[1]?.startsWith(shown), "docs/agents.md differs from the README");
  });

  test("backoff doubles from the base delay up to the ceiling, jittered on its upper half", () => {
    const policy = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1_000 };
    assert.deepEqual([0, 1, 2, 5].map((n) => backoffMs(policy, n, () => 0)), [50, 100, 200, 500]);
    assert.deepEqual([0, 1, 2, 5].map((n) => backoffMs(policy, n, () => 1)), [100, 200, 400, 1_000]);
  });
});

type Answer = { status: number; body: string; type?: string } | "hang";

/** A loopback server that answers the scripted replies in order and records what it was sent. */
class ScriptedServer {
  readonly seen: { url: string; headers: IncomingMessage["headers"]; body: string }[] = [];
  private replies: Answer[] = [];
  private readonly server = createServer((req, res) => this.answer(req, res));

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  script(...replies: Answer[]): void {
    this.replies = replies;
    this.seen.length = 0;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      this.seen.push({ url: req.url ?? "", headers: req.headers, body });
      const reply = this.replies.shift() ?? { status: 500, body: "script ran out" };
      if (reply === "hang") return;
      res.writeHead(reply.status, { "content-type": reply.type ?? "application/json" }).end(reply.body);
    });
  }
}

function envelope(code: number, data: unknown = null, trace = "t-1"): Answer {
  const status = code >= 40000 ? Math.floor(code / 100) : 200;
  return { status, body: JSON.stringify({ code, msg: `code ${code}`, trace_id: trace, data }) };
}

describe("sending", () => {
  const server = new ScriptedServer();
  let client: EngramClient;
  let url: string;

  before(async () => {
    url = await server.start();
    client = new EngramClient({ baseUrl: url, apiKey: "k-1", retry: { baseDelayMs: 1, maxDelayMs: 2 } });
  });
  after(() => server.stop());

  test("a rate-limited or unavailable answer is sent again until it succeeds", async () => {
    server.script(envelope(42903), envelope(50301), envelope(0, { task_id: "a".repeat(32), accepted: true }));
    const task = await client.add({ user_id: "u1", messages: [{ role: "user", content: "hi" }] });
    assert.equal(task.task_id, "a".repeat(32));
    assert.equal(server.seen.length, 3);
    assert.ok(server.seen.every((s) => s.url === "/memory/v1/add" && s.headers.authorization === "Bearer k-1"));
    assert.deepEqual(JSON.parse(server.seen[2]?.body ?? ""), { user_id: "u1", messages: [{ role: "user", content: "hi" }] });
  });

  test("retries stop after the policy's attempts, with the last refusal thrown", async () => {
    server.script(envelope(42903), envelope(42903), envelope(42903), envelope(42903, null, "t-last"), envelope(0));
    const error = await client.recall({ user_id: "u1", query: "q" }).catch((e: unknown) => e);
    assert.ok(error instanceof EngramError);
    assert.equal(error.code, ErrorCode.RATE_LIMITED);
    assert.equal(error.traceId, "t-last");
    assert.equal(error.status, 429);
    assert.equal(server.seen.length, DEFAULT_RETRY.attempts);
  });

  test("any other code is thrown at once with its trace id; the caller's trace id is sent", async () => {
    server.script(envelope(40001, null, "my-trace"), envelope(0));
    const error = await client.task({ task_id: "x" }, { traceId: "my-trace" }).catch((e: unknown) => e);
    assert.ok(error instanceof EngramError);
    assert.deepEqual([error.code, error.traceId, error.status], [40001, "my-trace", 400]);
    assert.equal(server.seen.length, 1);
    assert.equal(server.seen[0]?.headers["x-trace-id"], "my-trace");
  });

  test("the caller's traceparent is sent as given", async () => {
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    server.script(envelope(0, { hit: false, memories: [] }));
    await client.recall({ user_id: "u1", query: "q" }, { traceparent });
    assert.equal(server.seen[0]?.headers.traceparent, traceparent);
  });

  test("recall's 20001 is an empty result, not an error", async () => {
    server.script(envelope(20001, { hit: false, memories: [], profile: null }));
    assert.deepEqual(await client.recall({ user_id: "u1", query: "q" }), { hit: false, memories: [], profile: null });
  });

  test("a proxy's 503 page is sent again; its 502 is not (the request may have been applied)", async () => {
    const page = (status: number): Answer => ({ status, body: "<html>no server</html>", type: "text/html" });
    server.script(page(503), envelope(0, { memory_id: "m".repeat(32) }));
    const made = await client.addStructured({ user_id: "u1", ownership: "USER", mem_type: "SEMANTIC", content: "c" });
    assert.deepEqual(made, { memory_id: "m".repeat(32) });
    server.script(page(502), envelope(0));
    const error = await client.profile({ user_id: "u1" }).catch((e: unknown) => e);
    assert.ok(error instanceof EngramError);
    assert.deepEqual([error.code, error.status], [ErrorCode.DEPENDENCY_UNAVAILABLE, 502]);
    assert.equal(server.seen.length, 1);
  });

  test("no answer within the timeout is 50301 with status 0, and not sent again", async () => {
    const impatient = new EngramClient({ baseUrl: url, timeoutMs: 100, retry: { baseDelayMs: 1 } });
    server.script("hang", envelope(0));
    const error = await impatient.history({ user_id: "u1", memory_id: "m" }, { traceId: "t-9" }).catch((e: unknown) => e);
    assert.ok(error instanceof EngramError);
    assert.deepEqual([error.code, error.status, error.traceId], [50301, 0, "t-9"]);
    assert.equal(server.seen.length, 1);
  });

  test("pages are followed until the cursor runs out", async () => {
    const change = (id: number) => ({ change_id: id });
    server.script(
      envelope(0, { changes: [change(3), change(2)], next_cursor: "2" }),
      envelope(0, { changes: [change(1)], next_cursor: null }),
    );
    const ids: number[] = [];
    for await (const c of client.iterChangeLog({ user_id: "u1", limit: 2 })) ids.push(c.change_id);
    assert.deepEqual(ids, [3, 2, 1]);
    assert.deepEqual(server.seen.map((s) => JSON.parse(s.body).cursor), [null, "2"]);
  });

  test("an export streams its lines; a refusal is thrown with its code", async () => {
    server.script({ status: 200, type: "application/x-ndjson", body: '{"a":1}\n\n{"b":2}\n' });
    const lines: string[] = [];
    for await (const line of client.exportLines({ user_id: "u1", task_id: "t" })) lines.push(line);
    assert.deepEqual(lines, ['{"a":1}', '{"b":2}']);
    server.script(envelope(40401));
    const error = await (async () => {
      for await (const _ of client.exportLines({ user_id: "u1", task_id: "t" })) void _;
    })().catch((e: unknown) => e);
    assert.ok(error instanceof EngramError);
    assert.equal(error.code, ErrorCode.NOT_FOUND);
  });
});
