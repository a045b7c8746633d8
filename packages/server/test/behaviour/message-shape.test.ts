// One declaration of the delivered message (@duet/protocol's message.ts) makes every surface:
// this file loads the relay and the SDK with that declaration extended by two fields, a text
// (`subject`, marked carriesText) and a number (`priority`), as an edit of message.ts would,
// and shows both reach recv's JSON, both stream formats, the MCP recv tool (its result and its
// output schema) and the SDK's recv and stream, and that the SDK opens the marked field in an
// encrypted room. Only the store is stood in for: it keeps each message's values of the new
// fields (a real field is stored by the send and recv scripts, CONTRIBUTING.md's checklist).
import { DuetClient, type SeatCredentials } from "@duet/client";
import { MESSAGE_TEXT_FIELDS } from "@duet/protocol";
import type { RoomStore } from "../../src/store/room-store";
import { openStream } from "../support/stream-client";
import { forEachTarget } from "../support/targets";

jest.mock("../../../protocol/dist/message", () => {
  const actual = jest.requireActual("../../../protocol/dist/message");
  const { z } = jest.requireActual("zod");
  return {
    ...actual,
    Message: actual.Message.extend({ subject: actual.carriesText(z.string()), priority: z.number().int() }),
  };
});

type Extra = { subject: string; priority: number };

/** The store keeps the new fields' values: each message's, added to what it reads. */
function keepExtraFields(store: RoomStore): Map<string, Extra> {
  const extras = new Map<string, Extra>();
  const readInbox = store.readInbox.bind(store);
  store.readInbox = async (seat, touch) => {
    const snapshot = await readInbox(seat, touch);
    return { ...snapshot, messages: snapshot.messages.map((m) => ({ ...m, ...extras.get(m.id) })) };
  };
  return extras;
}

/** One JSON-RPC call to /mcp, its result (the relay answers SSE or JSON). */
async function mcp(url: string, method: string, params: unknown): Promise<any> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const text = await response.text();
  return JSON.parse(/^data: (.*)$/m.exec(text)?.[1] ?? text).result;
}

forEachTarget(
  (target) => {
    it("the declaration marks the new text field as carrying text, as it marks text", () => {
      expect(MESSAGE_TEXT_FIELDS).toEqual(["text", "subject"]);
    });

    it("a field added to the declaration reaches recv, both stream formats, the MCP tool and the SDK", async () => {
      const { client, nodes } = target();
      const extras = keepExtraFields(nodes[0]!.store);
      const room = await client.pairedRoom();
      const { id } = (await client.send(room.code, room.a, "hello")).body;
      extras.set(id, { subject: "greeting", priority: 2 });
      const delivered = { id, from: "a", text: "hello", subject: "greeting", priority: 2 };

      // recv, as JSON (checked against the OpenAPI document, made from the same declaration).
      expect((await client.recv(room.code, room.b, 0)).body.messages).toEqual([delivered]);
      // The stream, in both formats.
      for (const format of ["sse", "ndjson"] as const) {
        const stream = await openStream(client, room.code, room.b, { format });
        try {
          expect((await stream.event(0)).data).toEqual(delivered);
          const line =
            format === "sse"
              ? `data: ${JSON.stringify(delivered)}\n`
              : `${JSON.stringify({ event: "message", ...delivered })}\n`;
          expect(stream.raw()).toContain(line);
        } finally {
          stream.close();
        }
      }
      // The MCP recv tool: its result, and the output schema it advertises.
      const url = client.nodeUrl(0);
      const result = await mcp(url, "tools/call", {
        name: "recv",
        arguments: { code: room.code, token: room.b, wait: 0 },
      });
      expect(result.structuredContent.messages).toEqual([delivered]);
      expect(JSON.parse(result.content[0].text).messages).toEqual([delivered]);
      const { tools } = await mcp(url, "tools/list", {});
      const recvTool = tools.find((tool: { name: string }) => tool.name === "recv");
      expect(Object.keys(recvTool.outputSchema.properties.messages.items.properties)).toEqual(Object.keys(delivered));
      // The SDK: recv's decoder and the stream's parser.
      const sdk = new DuetClient({ baseUrl: url });
      const seat = { code: room.code, token: room.b };
      expect((await sdk.recv(seat, { waitMs: 0 })).messages).toEqual([delivered]);
      const abort = new AbortController();
      let streamed: unknown;
      for await (const event of sdk.stream(seat, { signal: abort.signal })) {
        if (event.event !== "message") continue;
        streamed = event.message;
        abort.abort();
        break;
      }
      // Asserted after the loop: a stream that ended before any message fails here.
      expect(streamed).toEqual(delivered);
    });

    it("in an encrypted room the SDK opens the new text field as it opens text, and refuses a message when it fails", async () => {
      const { client, nodes } = target();
      const extras = keepExtraFields(nodes[0]!.store);
      const sdk = new DuetClient({ baseUrl: client.nodeUrl(0) });
      const opened = await sdk.open({ e2e: true });
      const joined = await sdk.join(opened.code, { key: opened.key });
      const a: SeatCredentials = { code: opened.code, token: opened.token, e2e: opened.e2e_session };
      const b: SeatCredentials = { code: joined.code, token: joined.token, e2e: joined.e2e_session };
      // The sender seals each text field of one message with that message's sequence number.
      const { id } = await sdk.send(a, "the text");
      const sealedSubject = a.e2e!.sealField("the subject");
      extras.set(id, { subject: sealedSubject, priority: 3 });

      // The relay passes the envelope through; only the SDK opens it.
      expect((await client.recv(opened.code, joined.token, 0)).body.messages[0].subject).toBe(sealedSubject);
      expect(await sdk.recv(b, { waitMs: 0 })).toEqual({
        messages: [{ id, from: "a", text: "the text", subject: "the subject", priority: 3, seq: 1 }],
        rejected: [],
      });

      // A subject moved from another message (sealed with its sequence number) is refused, and
      // the refusal shows the fields that carry no text.
      const second = await sdk.send(a, "second");
      extras.set(second.id, { subject: sealedSubject, priority: 4 });
      const answer = await sdk.recv(b, { waitMs: 0, ack: [id] });
      expect(answer.messages).toEqual([]);
      expect(answer.rejected).toEqual([
        { id: second.id, from: "a", priority: 4, reason: "replayed", explanation: expect.any(String) },
      ]);
    });
  },
  { kinds: ["memory", "redis"] },
);
