// A third-party MCP client: the official TypeScript SDK over Streamable HTTP. Lists the tools,
// runs a search, then sends a bad argument; prints one JSON line for tests/e2e to check.
//   node conformance/sdk-client.mjs URL QUERY PROJECT TOKEN
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, query, project, token] = process.argv.slice(2);
const client = new Client({ name: 'vera-e2e-typescript-sdk', version: '0.0.1' });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
try {
  const { tools } = await client.listTools();
  const search = await client.callTool({ name: 'knowledge_search', arguments: { query, project } });
  let badInput = null;
  try {
    await client.callTool({ name: 'knowledge_search', arguments: { query: '' } });
  } catch (error) {
    badInput = { code: error.code, data: error.data ?? null };
  }
  console.log(JSON.stringify({
    protocol: transport.protocolVersion,
    tools: tools.map((tool) => tool.name),
    search: { isError: search.isError ?? false, structuredContent: search.structuredContent },
    badInput,
  }));
} finally {
  await client.close();
}
