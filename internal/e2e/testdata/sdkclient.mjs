// A client of acphub's standard /acp endpoint built on the ACP TypeScript
// SDK's own remote transports (experimental/http-client, experimental/
// ws-client), for TestSDKClient_*. It lists the sessions, creates one, runs
// a demo turn whose permission request it allows, loads the session named
// by its last argument, resumes it, lists the sessions again (for the
// title the demo agent gave the new one), has the new session remember
// something, forks it and asks the fork what it remembers, deletes the
// fork, lists the sessions once more, and prints what it saw as one JSON
// line.
//
// Usage: node sdkclient.mjs http|ws URL TOKEN SESSION_TO_LOAD [PACKAGE]
// PACKAGE is the SDK's package: @agentclientprotocol/sdk (the default, the
// version package.json pins) or @agentclientprotocol/sdk-latest (the
// newest release, under another name).
// Exit status 3: package ws, the WebSocket the SDK's ws-client is given, is
// not installed.
const [mode, url, token, toLoad, sdk = "@agentclientprotocol/sdk"] = process.argv.slice(2);
const acp = await import(sdk);
const { createHttpStream } = await import(`${sdk}/experimental/http-client`);
const { createWebSocketStream } = await import(`${sdk}/experimental/ws-client`);
const headers = { Authorization: `Bearer ${token}` };

async function openStream() {
  if (mode === "http") {
    return createHttpStream(url, { headers });
  }
  // Node's own WebSocket cannot send the token: the SDK passes headers the
  // way package ws takes them.
  let WebSocket;
  try {
    WebSocket = (await import("ws")).WebSocket;
  } catch {
    console.error("package ws is not installed");
    process.exit(3);
  }
  return createWebSocketStream(url, { headers, WebSocket });
}

const seen = { updates: [], text: "", replayed: [], resumedUpdates: [] };
let loading = false;
let resuming = false;
let capture = null; // the agent's text of the turn being captured
const stream = await openStream();
try {
  await acp
    .client({ name: "acphub-e2e-sdk-client" })
    .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
      seen.permissionSession = ctx.params.sessionId;
      seen.permissionOptions = ctx.params.options.map((o) => o.optionId);
      return { outcome: { outcome: "selected", optionId: "allow" } };
    })
    .onNotification(acp.methods.client.session.update, (ctx) => {
      const u = ctx.params.update;
      if (loading) {
        seen.replayed.push(`${u.sessionUpdate}:${u.content?.text ?? ""}`);
        return;
      }
      if (resuming) {
        seen.resumedUpdates.push(u.sessionUpdate);
        return;
      }
      seen.updates.push(u.sessionUpdate);
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
        seen.text += u.content.text;
        if (capture !== null) capture += u.content.text;
      }
    })
    .connectWith(stream, async (ctx) => {
      const init = await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      seen.loadSession = init.agentCapabilities?.loadSession === true;
      const list = await ctx.request(acp.methods.agent.session.list, {});
      seen.listed = list.sessions.map((s) => s.sessionId);
      const created = await ctx.request(acp.methods.agent.session.new, { cwd: "/tmp", mcpServers: [] });
      seen.sessionId = created.sessionId;
      const done = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: created.sessionId,
        prompt: [{ type: "text", text: "hello" }],
      });
      seen.stopReason = done.stopReason;
      loading = true;
      await ctx.request(acp.methods.agent.session.load, { sessionId: toLoad, cwd: "/tmp", mcpServers: [] });
      loading = false;
      const again = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: toLoad,
        prompt: [{ type: "text", text: "/echo from the sdk" }],
      });
      seen.loadedStopReason = again.stopReason;
      seen.resumeAdvertised = init.agentCapabilities?.sessionCapabilities?.resume !== undefined;
      resuming = true;
      seen.resumed = await ctx.request(acp.methods.agent.session.resume, { sessionId: toLoad, cwd: "/tmp", mcpServers: [] });
      resuming = false;
      const listed = await ctx.request(acp.methods.agent.session.list, {});
      seen.title = listed.sessions.find((s) => s.sessionId === created.sessionId)?.title ?? null;

      const caps = init.agentCapabilities?.sessionCapabilities ?? {};
      seen.forkAdvertised = caps.fork !== undefined;
      seen.deleteAdvertised = caps.delete !== undefined;
      await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: created.sessionId,
        prompt: [{ type: "text", text: "/remember the sdk was here" }],
      });
      const fork = await ctx.request("session/fork", { sessionId: created.sessionId, cwd: "/tmp", mcpServers: [] });
      seen.forked = fork.sessionId;
      capture = "";
      await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: fork.sessionId,
        prompt: [{ type: "text", text: "/recall" }],
      });
      seen.recalled = capture;
      capture = null;
      seen.deleted = await ctx.request(acp.methods.agent.session.delete, { sessionId: fork.sessionId });
      const after = await ctx.request(acp.methods.agent.session.list, {});
      seen.listedAfterDelete = after.sessions.map((s) => s.sessionId);
    });
} finally {
  await stream.writable.close().catch(() => {});
}
console.log(JSON.stringify(seen));
process.exit(0);
