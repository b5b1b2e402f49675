// The README's example (test/offline.test.ts holds the two equal); test/live.test.ts runs it.

import { EngramClient, EngramError, ErrorCode } from "../src/index.js";

const engram = new EngramClient({
  baseUrl: process.env.ENGRAM_URL ?? "http://127.0.0.1:8000",
  apiKey: process.env.ENGRAM_API_KEY, // when the service has API keys configured
});

await engram.addStructured({
  user_id: "u1",
  ownership: "USER",
  mem_type: "SEMANTIC",
  content: "I prefer taking a taxi to work.",
  sync: true,
});
const { memories } = await engram.recall({ user_id: "u1", query: "how do I get to work?" });
console.log(memories.map((m) => m.content));

// A conversation: acknowledged at once, memories extracted in the background.
const { task_id } = await engram.add({
  user_id: "u1",
  app_id: "travel",
  messages: [{ role: "user", content: "I moved to Porto last spring." }],
});
console.log((await engram.task({ task_id })).status); // PENDING, RUNNING, then DONE

try {
  await engram.update({ user_id: "u1", memory_id: "0".repeat(32), content: "I walk to work." });
} catch (error) {
  if (!(error instanceof EngramError) || error.code !== ErrorCode.NOT_FOUND) throw error;
  console.log(`no such memory (trace ${error.traceId})`);
}
