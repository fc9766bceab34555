// A client of acphub's standard /acp endpoint built on the newest ACP
// TypeScript SDK's WebSocket transport, for TestNotices_*: it asks for
// notices and compaction (clientCapabilities.session), joins the hub
// session named by its third argument, has the demo agent send a notice
// and compact its context, and prints the session updates it got as one
// JSON line.
//
// Usage: node sdknotices.mjs URL TOKEN KEY
// Exit status 3: package ws is not installed.
const [url, token, key] = process.argv.slice(2);
const sdk = "@agentclientprotocol/sdk-latest";
const acp = await import(sdk);
const { createWebSocketStream } = await import(`${sdk}/experimental/ws-client`);
let WebSocket;
try {
  WebSocket = (await import("ws")).WebSocket;
} catch {
  console.error("package ws is not installed");
  process.exit(3);
}
const stream = await createWebSocketStream(url, { headers: { Authorization: `Bearer ${token}` }, WebSocket });
const seen = { updates: [], notice: null, summary: "", statuses: [] };
try {
  await acp
    .client({ name: "acphub-e2e-sdk-notices" })
    .onNotification(acp.methods.client.session.update, (ctx) => {
      const u = ctx.params.update;
      seen.updates.push(u.sessionUpdate);
      if (u.sessionUpdate === "notice") seen.notice = { severity: u.severity, title: u.title };
      if (u.sessionUpdate === "compaction_summary_chunk") seen.summary += u.content.text;
      if (u.sessionUpdate === "compaction_update") seen.statuses.push(u.status);
    })
    .connectWith(stream, async (ctx) => {
      await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { session: { notices: {}, compaction: {} } },
      });
      const created = await ctx.request(acp.methods.agent.session.new, { cwd: "/tmp", mcpServers: [], _meta: { "acphub.dev/key": key } });
      for (const text of ["/notice Rate limit near", "/compact"]) {
        await ctx.request(acp.methods.agent.session.prompt, { sessionId: created.sessionId, prompt: [{ type: "text", text }] });
      }
    });
} finally {
  await stream.writable.close().catch(() => {});
}
console.log(JSON.stringify(seen));
process.exit(0);
